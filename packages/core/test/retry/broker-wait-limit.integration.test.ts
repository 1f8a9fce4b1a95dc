import amqplib from 'amqplib'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AceMq, RetryPolicy, Topology } from '@acemq/core'
import { MAX_BROKER_WAIT, rungQueueName } from '@acemq/core/spi'
import { AmqpTransport } from '@acemq/transport-amqp'
import { BrokerVhost } from '../../../../test-support/broker-vhost.js'
import { requireRabbit, uniqueName } from '@acemq/testing'

const hasRabbit = await requireRabbit()

describe.runIf(hasRabbit)('the longest broker wait a policy allows, on RabbitMQ', () => {
  let vhost: BrokerVhost

  beforeAll(async () => {
    vhost = await BrokerVhost.create('acemq-broker-wait-limit')
  }, 60_000)

  afterAll(async () => {
    await vhost?.delete()
  }, 60_000)

  it('is a rung queue RabbitMQ declares', async () => {
    const queue = uniqueName('acemq.limit')
    const mq = await AceMq.connect(new AmqpTransport(vhost.url))
    try {
      await mq.applyTopology(
        Topology.define().queueWithRetry(queue, RetryPolicy.fixed(2, MAX_BROKER_WAIT)),
      )
    } finally {
      await mq.close({ drainTimeout: 0 })
    }
    const rung = await vhost.queue(rungQueueName(queue, MAX_BROKER_WAIT))
    expect(rung?.arguments).toContainEqual(['x-message-ttl', 'long', MAX_BROKER_WAIT])
  })

  it('is the largest: RabbitMQ refuses a rung queue 1 ms longer', async () => {
    const connection = await amqplib.connect(vhost.url)
    try {
      const channel = await connection.createChannel()
      channel.on('error', () => undefined)
      await expect(
        channel.assertQueue(uniqueName('acemq.limit.over'), {
          durable: true,
          arguments: { 'x-message-ttl': { '!': 'long', value: MAX_BROKER_WAIT + 1 } },
        }),
      ).rejects.toThrow(/PRECONDITION_FAILED.*x-message-ttl/)
    } finally {
      await connection.close()
    }
  })
})
