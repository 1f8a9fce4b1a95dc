import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { Ack, AceMq, ConsumerOptions, InMemoryTransport, Topology } from '../../src/index.js'
import { isAckResult } from '../../src/spi.js'

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

describe('isAckResult', () => {
  it.each([
    ['accept()', Ack.accept()],
    ['retry(reason)', Ack.retry('busy')],
    ['retry(reason, delay)', Ack.retry('busy', '2s')],
    ['deadLetter(reason)', Ack.deadLetter('bad')],
    ['park(reason)', Ack.park('look')],
    ['release()', Ack.release()],
  ])('counts Ack.%s', (_name, result) => {
    expect(isAckResult(result)).toBe(true)
  })

  it.each([
    { kind: 'accept' },
    { kind: 'release' },
    { kind: 'park', reason: 'x' },
    { kind: 'dead-letter', reason: 'x' },
    { kind: 'retry', reason: 'x' },
    { kind: 'retry', reason: 'x', delayMs: 10 },
  ])('does not count a plain object shaped like one: %o', (lookalike) => {
    expect(isAckResult(lookalike)).toBe(false)
  })

  it('does not count a copy of an Ack result', () => {
    expect(isAckResult({ ...Ack.park('look') })).toBe(false)
    expect(isAckResult(JSON.parse(JSON.stringify(Ack.release())))).toBe(false)
  })

  it('agrees with another installed copy of core on what is an Ack result', async () => {
    // A second instance of the module, as a second installed copy of @acemq/core would be.
    const path = '../../src/consumer/ack.js?another-copy'
    const other = (await import(
      /* @vite-ignore */ path
    )) as typeof import('../../src/consumer/ack.js')
    expect(other.Ack).not.toBe(Ack)
    expect(isAckResult(other.Ack.park('look'))).toBe(true)
    expect(other.isAckResult(Ack.release())).toBe(true)
    expect(other.isAckResult({ kind: 'release' })).toBe(false)
  })

  it('recognises a result branded under the registered key acemq.ack, as every copy and version brands it', () => {
    const brand = Symbol.for('acemq.ack')
    const foreign = Object.defineProperty({ kind: 'release' }, brand, { value: brand })
    expect(isAckResult(foreign)).toBe(true)
    const otherKey = Symbol.for('another.ack')
    expect(
      isAckResult(Object.defineProperty({ kind: 'release' }, otherKey, { value: otherKey })),
    ).toBe(false)
  })

  it('leaves the brand out of what a result shows: its keys and its JSON', () => {
    expect(Object.keys(Ack.retry('busy', '2s'))).toStrictEqual(['kind', 'reason', 'delayMs'])
    expect(JSON.stringify(Ack.park('look'))).toBe('{"kind":"park","reason":"look"}')
  })
})

describe('a handler that returns a value not made by Ack', () => {
  let transport: InMemoryTransport
  let mq: AceMq

  beforeEach(async () => {
    transport = new InMemoryTransport()
    mq = await AceMq.connect(transport)
    await mq.applyTopology(Topology.define().queueWithDeadLetter('rows'))
  })

  afterEach(async () => {
    await mq.close({ drainTimeout: 0 })
  })

  it.each([
    { id: 7, kind: 'release' },
    { id: 7, kind: 'park', reason: 'x' },
    { id: 7, kind: 'dead-letter', reason: 'x' },
    { id: 7, kind: 'retry', reason: 'x' },
  ])('is accepted: the row %o is acked once, not rerun or moved', async (row) => {
    let calls = 0
    await mq.consume('rows', ConsumerOptions.defaults(), () => {
      calls++
      return row as never
    })
    await mq.publisher('', 'rows').send({ id: 7 })
    while (calls === 0) await sleep(5)
    // A release would hand it straight back, a retry hold or republish it: give either time.
    await sleep(200)
    expect(mq.inFlight).toBe(0)
    expect(calls).toBe(1)
    expect(transport.messageCount('rows')).toBe(0)
    expect(transport.messageCount('rows.dlq')).toBe(0)
    expect(transport.messageCount('rows.parked')).toBe(0)
  })
})
