import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AceMq } from '@acemq/core'
import { amqpScenarioTarget } from '../../../test-support/amqp-target.js'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import { orderedScenarios, requireRabbit, uniqueName } from '@acemq/testing'
import { AmqpTransport } from '../src/index.js'
import { LOCK_WAIT_TIMEOUT, holdBrokerFaultLock } from './support/broker.js'

const hasRabbit = await requireRabbit()

describe.runIf(hasRabbit)('ordered queues on AmqpTransport', () => {
  let vhost: BrokerVhost
  // Application publishes refuse on a blocked connection: keep broker alarms out meanwhile.
  let releaseLock: (() => Promise<void>) | undefined
  beforeAll(async () => {
    releaseLock = await holdBrokerFaultLock()
    vhost = await BrokerVhost.create('acemq-ordered')
  }, LOCK_WAIT_TIMEOUT)
  afterAll(async () => {
    await vhost?.delete()
    await releaseLock?.()
  })

  // The target is created per scenario, after the vhost exists.
  orderedScenarios('AmqpTransport (RabbitMQ)', {
    createTransport: () => amqpScenarioTarget(vhost.url, 'acemq-ordered').createTransport(),
    probe: (transport) => amqpScenarioTarget(vhost.url, 'acemq-ordered').probe(transport),
  })

  it('declares each partition as a durable quorum queue with a single active consumer, dead-lettering to its dlq', async () => {
    await using mq = await AceMq.connect(new AmqpTransport(vhost.url))
    const name = uniqueName('ledger')
    const ledger = await mq.ordered(name).partitions(3).declare()
    expect(ledger.queues).toEqual([`${name}.0`, `${name}.1`, `${name}.2`])
    const listed = new Map((await vhost.queues()).map((queue) => [queue.name, queue]))
    for (const queue of ledger.queues) {
      const partition = listed.get(queue)
      expect(partition?.type).toBe('quorum')
      expect(partition?.durable).toBe(true)
      expect(
        Object.fromEntries(partition?.arguments.map(([key, , value]) => [key, value]) ?? []),
      ).toEqual({
        'x-dead-letter-exchange': 'acemq.dlx',
        'x-dead-letter-routing-key': `${queue}.dlq`,
        'x-queue-type': 'quorum',
        'x-single-active-consumer': true,
      })
      expect(listed.get(`${queue}.dlq`)?.type).toBe('classic')
      expect(listed.get(`${queue}.parked`)?.type).toBe('classic')
    }
  })

  it('consumes every partition with a prefetch of 1', async () => {
    await using mq = await AceMq.connect(new AmqpTransport(vhost.url))
    const ledger = await mq.ordered(uniqueName('ledger')).partitions(2).declare()
    const consumer = await ledger.consume(() => undefined)
    for (const queue of ledger.queues) expect(await vhost.consumerPrefetch(queue)).toEqual([1])
    await consumer.close()
    for (const queue of ledger.queues) expect(await vhost.consumerPrefetch(queue)).toEqual([])
  })
})
