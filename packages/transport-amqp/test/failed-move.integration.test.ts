import { afterEach, describe, expect, it } from 'vitest'
import { AceMq, Ack, ConsumerOptions, Topology } from '@acemq/core'
import { readEnvelope } from '@acemq/core/spi'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { RecordingTransport, AMQP_URL, requireRabbit, uniqueName } from '@acemq/testing'
import { AmqpTransport } from '../src/index.js'

const hasRabbit = await requireRabbit()

async function eventually(
  condition: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${what} did not hold within ${timeoutMs} ms`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

describe.runIf(hasRabbit)('a dead-letter copy that RabbitMQ refuses', () => {
  let mq: AceMq | undefined
  let admin: AmqpAdmin | undefined
  const queues: string[] = []
  afterEach(async () => {
    await mq?.close({ drainTimeout: 0 })
    mq = undefined
    await admin?.deleteQueues(...queues.splice(0))
    await admin?.close()
    admin = undefined
  })

  it('is held and tried again in the consumer, never requeued into the quorum queue’s delivery limit, and lands once the dlq takes it', async () => {
    const q = uniqueName('failed-move')
    queues.push(q, `${q}.dlq`, `${q}.parked`)
    admin = await AmqpAdmin.open(AMQP_URL)
    const transport = new RecordingTransport(
      new AmqpTransport(AMQP_URL, { connectionName: 'acemq-failed-move' }),
    )
    const errors: string[] = []
    mq = await AceMq.connect(transport, { onError: (_error, context) => errors.push(context) })
    // A quorum source queue that gives up on a message after two requeues, as RabbitMQ 4 does
    // after twenty by default: its dead-lettering would then drop it into a full dlq.
    await mq.applyTopology(
      Topology.define().queueWithDeadLetter(q, { arguments: { 'x-delivery-limit': 2 } }),
    )
    let calls = 0
    await mq.consume(q, ConsumerOptions.defaults(), () => {
      calls++
      return Ack.deadLetter('poison')
    })
    // Then the dlq is replaced by one that refuses every publish: the broker nacks the engine's copy.
    await admin.deleteQueues(`${q}.dlq`)
    await admin.channel.assertQueue(`${q}.dlq`, {
      durable: true,
      arguments: { 'x-max-length': 0, 'x-overflow': 'reject-publish' },
    })
    await admin.channel.bindQueue(`${q}.dlq`, 'acemq.dlx', `${q}.dlq`)
    await mq.publisher('', q).send({ order: 7 }, { id: 'precious' })
    await eventually(
      () => errors.filter((e) => e.includes('could not move message precious')).length >= 3,
      15_000,
      'three tries of the move',
    )
    // Held, not handed back: the handler ran once and no requeue spent the delivery limit.
    expect(calls).toBe(1)
    expect(transport.settlementsOf('precious')).toEqual([])
    const health = await mq.health()
    expect(health.reports.find((r) => r.name === 'consumers')).toMatchObject({
      status: 'DEGRADED',
      details: { failingMoves: `${q} -> ${q}.dlq` },
    })
    // Someone fixes the dlq (deletes the broken one): the engine declares it again and moves.
    await admin.deleteQueues(`${q}.dlq`)
    await eventually(
      async () => (await admin?.count(`${q}.dlq`)) === 1,
      20_000,
      'the copy on the dlq',
    )
    const copy = await admin.get(`${q}.dlq`)
    expect(JSON.parse(copy?.body.toString() ?? 'null')).toEqual({ order: 7 })
    expect(readEnvelope(copy?.headers, { routingKey: q }).envelope.error).toBe('poison')
    expect(calls).toBe(1)
    await eventually(() => transport.settlementsOf('precious').length === 1, 5_000, 'the ack')
    expect(transport.settlementsOf('precious')).toEqual([
      expect.objectContaining({ kind: 'ack', written: true }),
    ])
    expect(await admin.count(q)).toBe(0)
    expect((await mq.health()).status).toBe('UP')
  }, 60_000)
})
