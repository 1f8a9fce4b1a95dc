import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ConsumerOptions, RetryPolicy, Topology } from '@acemq/core'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { AMQP_URL, requireRabbit, uniqueName } from '@acemq/testing'
import { connect } from '../src/index.js'

const hasRabbit = await requireRabbit()

describe.runIf(hasRabbit)('consuming a queue that does not exist, on RabbitMQ', () => {
  let admin: AmqpAdmin
  const queue = uniqueName('misspelt.orders')
  const policy = RetryPolicy.exponential(3, '1m') // waits of 1 and 2 minutes: broker rungs
  const declaredForIt = [
    `${queue}.dlq`,
    `${queue}.parked`,
    `${queue}.retry.1m`,
    `${queue}.retry.2m`,
  ]

  beforeAll(async () => {
    admin = await AmqpAdmin.open()
  })

  afterAll(async () => {
    await admin.deleteQueues(queue, ...declaredForIt)
    await admin.close()
  })

  it('is refused with the queue named, and leaves no .dlq, .parked or rung queue behind', async () => {
    await using mq = await connect(AMQP_URL)
    await expect(
      mq.consume(queue, ConsumerOptions.defaults().withRetry(policy), () => undefined),
    ).rejects.toThrow(`queue '${queue}' does not exist`)
    for (const name of declaredForIt) expect(await admin.count(name), name).toBeUndefined()

    // The connection is fine: once the queue exists, the same consume works.
    await mq.applyTopology(Topology.define().queueWithRetry(queue, policy))
    const consumer = await mq.consume(
      queue,
      ConsumerOptions.defaults().withRetry(policy),
      () => undefined,
    )
    await consumer.close()
    expect(await admin.count(`${queue}.dlq`)).toBe(0)
  })
})
