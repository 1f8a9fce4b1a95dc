import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AceMq, ErrorCodes, errorCodeOf } from '@acemq/core'
import { readEnvelope } from '@acemq/core/spi'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import { eventually, requireRabbit, uniqueName, type Entry } from '@acemq/testing'
import { AmqpTransport } from '../src/index.js'

const hasRabbit = await requireRabbit()

// A partition is a quorum queue with a single active consumer, which refuses basic.get.
describe.runIf(hasRabbit)('peeking into an ordered partition', () => {
  let vhost: BrokerVhost
  let admin: AmqpAdmin
  beforeAll(async () => {
    vhost = await BrokerVhost.create('acemq-peek-partition')
    admin = await AmqpAdmin.open(vhost.url)
  })
  afterAll(async () => {
    await admin?.close()
    await vhost?.delete()
  })

  /** Every message of `queue`, taken by a consumer (basic.get is refused on a partition). */
  async function idsIn(queue: string, count: number): Promise<string[]> {
    const channel = await admin.connection.createChannel()
    const ids: string[] = []
    await new Promise<void>((resolve) => {
      void channel.consume(
        queue,
        (message) => {
          if (message === null) return
          ids.push(readEnvelope(message.properties.headers, { routingKey: queue }).envelope.id)
          channel.ack(message)
          if (ids.length === count) resolve()
        },
        { noAck: false },
      )
    })
    await channel.close()
    return ids
  }

  async function connect(name: string): Promise<AceMq> {
    return AceMq.connect(new AmqpTransport(vhost.url, { connectionName: name }))
  }

  it('shows the head of a partition no one consumes, and leaves it in its order', async () => {
    await using mq = await connect('acemq-peek-idle')
    const ledger = await mq
      .ordered<Entry>(uniqueName('ledger'))
      .partitions(1)
      .keyedBy((entry) => entry.account)
      .declare()
    for (let seq = 1; seq <= 40; seq++) {
      await ledger.send({ account: 'acct-1', seq }, { id: `e-${seq}` })
    }
    const seen = await mq.replay(ledger.queueFor(0)).peek(3)
    expect(seen.map((m) => m.envelope.id)).toEqual(['e-1', 'e-2', 'e-3'])
    expect(await idsIn(ledger.queueFor(0), 40)).toEqual(
      Array.from({ length: 40 }, (_, i) => `e-${i + 1}`),
    )
  })

  it('says, instead of RESOURCE_LOCKED, that another connection holds a halted partition', async () => {
    await using service = await connect('acemq-peek-service')
    await using operator = await connect('acemq-peek-operator')
    const ledger = await service
      .ordered<Entry>(uniqueName('ledger'))
      .partitions(1)
      .keyedBy((entry) => entry.account)
      .onFailure('stop', { attempts: 1, delay: 1 })
      .declare()
    await ledger.consume((message) => {
      if (message.payload.seq === 2) throw new Error('amount is not a number')
    })
    for (let seq = 1; seq <= 4; seq++) await ledger.send({ account: 'acct-1', seq })
    await eventually(() => ledger.haltedPartitions.length === 1, 10_000, 'the halt')

    const refused = await operator
      .replay(ledger.queueFor(0))
      .peek(2)
      .then(
        () => undefined,
        (error: unknown) => error,
      )
    expect(errorCodeOf(refused)).toBe(ErrorCodes.INVALID_STATE)
    expect((refused as Error).message).toMatch(/single active consumer on another connection/)
    expect(ledger.haltedPartitions).toEqual([0])
    await eventually(
      async () => (await vhost.counts(ledger.queueFor(0)))?.unacked === 1,
      10_000,
      'the halted entry still held by the service',
    )
  })
})
