import { describe, expect, it } from 'vitest'
import {
  AceMq,
  AceMqError,
  ErrorCodes,
  InMemoryTransport,
  ReplayStoppedError,
  Topology,
  errorCodeOf,
} from '../../src/index.js'
import type { GiveBack, OutgoingMessage } from '../../src/spi.js'

/** An in-memory broker that keeps every message published through it. */
class RecordingTransport extends InMemoryTransport {
  readonly published: OutgoingMessage[] = []
  override publish(...args: Parameters<InMemoryTransport['publish']>): Promise<void> {
    this.published.push(args[0])
    return super.publish(...args)
  }
}

async function brokerWithDeadLetter(queue: string): Promise<{
  transport: RecordingTransport
  mq: AceMq
}> {
  const transport = new RecordingTransport()
  const mq = await AceMq.connect(transport)
  await mq.applyTopology(Topology.define().queueWithDeadLetter(queue))
  return { transport, mq }
}

describe('a replayed copy', () => {
  it('drops the user-id the broker kept when it dead-lettered the message', async () => {
    const { transport, mq } = await brokerWithDeadLetter('copies.user-id')
    // As RabbitMQ dead-letters it: the first publisher's validated user-id stays on the message.
    await transport.publish({
      exchange: '',
      routingKey: 'copies.user-id.dlq',
      body: Buffer.from('{}'),
      headers: { 'x-acemq-id': 'order-9', 'x-acemq-error': 'gave up' },
      properties: { contentType: 'application/json', messageId: 'order-9', userId: 'billing' },
      persistent: true,
      mandatory: true,
    })
    transport.published.length = 0

    expect(await mq.replay('copies.user-id.dlq').replayAll()).toBe(1)

    expect(transport.published).toHaveLength(1)
    expect(transport.published[0]?.properties.userId).toBeUndefined()
    expect(transport.published[0]?.properties.messageId).toBe('order-9')
    await mq.close()
  })
})

describe('a replay cut off', () => {
  it('rejects with how many it had moved when the connection goes between two windows', async () => {
    const { transport, mq } = await brokerWithDeadLetter('copies.cut-off')
    for (let i = 0; i < 250; i++) {
      await transport.publish({
        exchange: '',
        routingKey: 'copies.cut-off.dlq',
        body: Buffer.from('{}'),
        headers: { 'x-acemq-id': `m-${i}` },
        properties: { contentType: 'application/json' },
        persistent: true,
        mandatory: true,
      })
    }
    let gets = 0
    const getOne = transport.getOne.bind(transport)
    transport.getOne = async (queue) => {
      if (++gets > 150) {
        throw new AceMqError('the connection to the broker is down', {
          code: ErrorCodes.CONNECTION_DOWN,
        })
      }
      return getOne(queue)
    }

    const stopped = await mq
      .replay('copies.cut-off.dlq')
      .replayAll()
      .then(
        () => undefined,
        (error: unknown) => error,
      )

    expect(stopped).toBeInstanceOf(ReplayStoppedError)
    expect(errorCodeOf(stopped)).toBe(ErrorCodes.CONNECTION_DOWN)
    expect(stopped).toMatchObject({ moved: 100, notWritten: [] })
    expect((stopped as Error).message).toMatch(/stopped after moving 100 message\(s\)/)
    expect(transport.messageCount('copies.cut-off')).toBe(100)
    await mq.close()
  })
})

describe('giving back on a quorum queue that puts a message given back behind the others', () => {
  // RabbitMQ 3.x: no delivery limit, and a nack with requeue goes to the back.
  async function queueOf(count: number): Promise<{ transport: InMemoryTransport; mq: AceMq }> {
    const transport = new InMemoryTransport()
    const mq = await AceMq.connect(transport)
    await mq.applyTopology(
      Topology.define()
        .queue('round', { arguments: { 'x-delivery-limit': -1 } })
        .queue('round.into'),
    )
    for (let i = 1; i <= count; i++) {
      await transport.publish({
        exchange: '',
        routingKey: 'round',
        body: Buffer.from(String(i)),
        headers: { 'x-acemq-id': `r-${i}` },
        properties: {},
        persistent: true,
        mandatory: true,
      })
    }
    return { transport, mq }
  }

  const ids = (transport: InMemoryTransport, queue: string): string[] =>
    transport.peek(queue).map((m) => String(m.headers['x-acemq-id']))

  it('takes the queue round on a peek and says what it cost', async () => {
    const { transport, mq } = await queueOf(6)
    const returns: GiveBack[] = []
    const seen = await mq.replay('round').peek(2, { onReturned: (r) => returns.push(r) })
    expect(seen.map((m) => m.envelope.id)).toEqual(['r-1', 'r-2'])
    expect(ids(transport, 'round')).toEqual(['r-1', 'r-2', 'r-3', 'r-4', 'r-5', 'r-6'])
    expect(returns).toEqual([{ returned: 7, cycled: true }])
    await mq.close()
  })

  it('leaves what a limited, filtered replay passed over in its order', async () => {
    const { transport, mq } = await queueOf(6)
    const even = (message: { envelope: { id: string } }): boolean =>
      Number(message.envelope.id.slice(2)) % 2 === 0
    expect(await mq.replay('round').into('round.into').replay(2, even)).toBe(2)
    expect(ids(transport, 'round')).toEqual(['r-1', 'r-3', 'r-5', 'r-6'])
    expect(ids(transport, 'round.into')).toEqual(['r-2', 'r-4'])
    await mq.close()
  })
})
