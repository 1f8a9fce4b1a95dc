import { afterEach, beforeEach, expect, it } from 'vitest'
import { Ack, AceMq } from '../../src/index.js'
import { headerString } from '../../src/spi.js'
import { eventually } from '@acemq/testing'
import { RefusingTransport } from '../refusing-transport.js'

// A pipeline's life in one process: its steps' options, what a step may return besides the
// next payload, what it runs at once, a start that fails, and its close.

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

const pass = <T>(value: T): T => value

let transport: RefusingTransport
let mq: AceMq

beforeEach(async () => {
  transport = new RefusingTransport()
  mq = await AceMq.connect(transport, { onError: () => undefined })
})

afterEach(async () => {
  await mq.close({ drainTimeout: 0 })
})

/** A gate steps wait at until `open()`. */
function gate(): { wait: () => Promise<void>; open: () => void } {
  let open: () => void = () => undefined
  const opened = new Promise<void>((resolve) => (open = resolve))
  return { wait: () => opened, open }
}

it('names its steps when queueFor or build(options.consume) is given another', async () => {
  const pipeline = await mq.pipeline('p').step('a', pass).step('b', pass).build()
  expect(() => pipeline.queueFor('c')).toThrow(
    `pipeline 'p': queueFor(step) must name one of its steps (a, b); got "c"`,
  )
  await expect(
    mq
      .pipeline('q')
      .step('a', pass)
      .step('b', pass)
      .build({ consume: ['c'] }),
  ).rejects.toThrow(
    `pipeline 'q': build(options.consume) must list steps of this pipeline (a, b); got ["c"]`,
  )
})

it('is closed once close() is called: it refuses to send, its steps stop, and it can be built again', async () => {
  const ran: number[] = []
  const pipeline = await mq
    .pipeline<{ n: number }>('p')
    .step('a', (payload) => {
      ran.push(payload.n)
      return null
    })
    .build()
  expect(pipeline.closed).toBe(false)
  await pipeline.close()
  expect(pipeline.closed).toBe(true)
  await expect(pipeline.send({ n: 1 })).rejects.toThrow(
    "pipeline 'p' is closed: build it again to send",
  )
  expect(transport.messageCount('p.a')).toBe(0)
  // Its step consumer is gone: a message published to the step waits.
  const again = await mq.pipeline<{ n: number }>('p').step('a', pass).build({ consume: [] })
  await again.send({ n: 2 })
  await sleep(30)
  expect(ran).toEqual([])
  expect(transport.messageCount('p.a')).toBe(1)
})

it('closes when disposed', async () => {
  let closed: boolean | undefined
  {
    await using pipeline = await mq.pipeline('p').step('a', pass).build()
    closed = pipeline.closed
  }
  expect(closed).toBe(false)
  await expect(mq.pipeline('p').step('a', pass).build()).resolves.toBeDefined()
})

it('counts the steps running in flight, across its steps, and runs as many at once as its concurrency', async () => {
  const { wait, open } = gate()
  const pipeline = await mq
    .pipeline<{ n: number }>('p')
    .step('a', async (payload) => {
      if (payload.n > 0) await wait()
      return payload
    })
    .step('b', async (payload) => {
      await wait()
      return payload
    })
    .withConcurrency(2)
    .build()
  await pipeline.send({ n: 0 })
  await eventually(() => pipeline.inFlight === 1, 5_000, 'b running')
  await pipeline.send({ n: 1 })
  await pipeline.send({ n: 2 })
  await pipeline.send({ n: 3 })
  await eventually(() => pipeline.inFlight === 3, 5_000, 'two a and one b running')
  await sleep(20)
  expect(pipeline.inFlight).toBe(3)
  open()
  await eventually(() => pipeline.completed === 4, 5_000, 'the runs completed')
})

it('holds as many unacknowledged messages per step as its prefetch', async () => {
  const { wait, open } = gate()
  const pipeline = await mq
    .pipeline<{ n: number }>('p')
    .step('a', async () => {
      await wait()
      return null
    })
    .withPrefetch(2)
    .build()
  for (let n = 0; n < 4; n++) await pipeline.send({ n })
  await eventually(() => transport.unackedCount('p.a') === 2, 5_000, 'two taken')
  await sleep(20)
  expect([transport.unackedCount('p.a'), transport.messageCount('p.a')]).toEqual([2, 2])
  open()
  await eventually(() => pipeline.completed === 4, 5_000, 'the runs completed')
})

it('settles as a step says when it returns an Ack, and ends the run early on Ack.accept before the last step', async () => {
  const pipeline = await mq
    .pipeline<{ n: number }>('p')
    .step('a', (payload) => (payload.n === 1 ? Ack.deadLetter('not this one') : Ack.accept()))
    .step('b', pass)
    .build()
  await pipeline.send({ n: 1 })
  await pipeline.send({ n: 2 })
  await eventually(() => pipeline.endedEarly === 1, 5_000, 'the run ended early')
  await eventually(() => transport.messageCount('p.a.dlq') === 1, 5_000, 'dead-lettered')
  expect(headerString(transport.peek('p.a.dlq')[0]?.headers['x-acemq-error'])).toBe('not this one')
  expect([pipeline.completed, transport.messageCount('p.b')]).toEqual([0, 0])
})

it('parks the message of a step that returns undefined, saying what to return', async () => {
  const pipeline = await mq
    .pipeline<{ n: number }>('p')
    .step('a', () => undefined as unknown as { n: number })
    .step('b', pass)
    .build()
  await pipeline.send({ n: 1 })
  await eventually(() => transport.messageCount('p.a.parked') === 1, 5_000, 'parked')
  expect(headerString(transport.peek('p.a.parked')[0]?.headers['x-acemq-error'])).toBe(
    "step 'a' of pipeline 'p' returned undefined: return the payload for 'p.b', or null to end the run",
  )
  expect(pipeline.endedEarly).toBe(0)
})

it('closes the steps it started when one cannot start, and rejects with that failure', async () => {
  transport.refused = 'p.b'
  const ran: number[] = []
  const builder = mq
    .pipeline<{ n: number }>('p')
    .step('a', (payload) => {
      ran.push(payload.n)
      return payload
    })
    .step('b', pass)
    .step('c', pass)
  await expect(builder.build()).rejects.toThrow('cannot consume p.b')
  expect((await mq.health()).reports.map((r) => r.name)).not.toContain('pipeline:p')
  transport.refused = ''
  // Its started steps were closed: a run sent now waits at step a.
  const sender = await builder.build({ consume: [] })
  await sender.send({ n: 1 })
  await sleep(30)
  expect(ran).toEqual([])
  expect(transport.messageCount('p.a')).toBe(1)
})

it('does not wait for a step already running when another step cannot start', async () => {
  const sender = await mq.pipeline<{ n: number }>('p').step('a', pass).build({ consume: [] })
  await sender.send({ n: 1 })
  await sender.close()
  transport.refused = 'p.b'
  let started = false
  // Returns once its signal aborts: at once with the drain of 0 the close should give it.
  const refused = mq
    .pipeline<{ n: number }>('p')
    .step('a', (payload, { signal }) => {
      started = true
      return new Promise<{ n: number }>((resolve) =>
        signal.addEventListener('abort', () => resolve(payload)),
      )
    })
    .step('b', pass)
    .build()
  const at = Date.now()
  await expect(refused).rejects.toThrow('cannot consume p.b')
  expect(started).toBe(true)
  expect(Date.now() - at).toBeLessThan(2_000)
})
