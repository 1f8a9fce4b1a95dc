import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  AceMq,
  ConfigurationError,
  InMemoryTransport,
  Topology,
  type Envelope,
} from '../../src/index.js'
import { headerString } from '../../src/spi.js'
import type { OutgoingMessage, TransportPublishOptions } from '../../src/spi.js'
import { eventually } from '@acemq/testing'

// What a hop publishes (docs/design.md §15): the delivery's application headers (never its
// `x-acemq-*` ones, whatever their case), the envelope carried, the message id when it fits.

/** An in-memory broker that keeps every hop step `a` publishes (anything not sent to `a`). */
class RecordingTransport extends InMemoryTransport {
  readonly hops: OutgoingMessage[] = []

  override async publish(
    message: OutgoingMessage,
    options?: TransportPublishOptions,
  ): Promise<void> {
    if (message.routingKey !== 'a' && !message.routingKey.startsWith('p.a.')) {
      this.hops.push(message)
    }
    await super.publish(message, options)
  }
}

let transport: RecordingTransport
let mq: AceMq
let arrived: { envelope: Envelope; headers: Record<string, unknown> }[]

beforeEach(async () => {
  transport = new RecordingTransport()
  mq = await AceMq.connect(transport, { onError: () => undefined, origin: 'shop@test' })
  arrived = []
})

afterEach(async () => {
  await mq.close({ drainTimeout: 0 })
})

function build() {
  return mq
    .pipeline<{ n: number }>('p')
    .step('a', (payload) => payload)
    .step('b', (payload, { message }) => {
      arrived.push({ envelope: message.envelope, headers: { ...message.headers } })
      return payload
    })
    .build()
}

/** A message published to step `a` by hand, as another library or an operator would. */
function publishRaw(headers: Record<string, unknown>, messageId: string): Promise<void> {
  return transport.publish({
    exchange: 'p',
    routingKey: 'a',
    body: new TextEncoder().encode('{"n":1}'),
    headers: headers as OutgoingMessage['headers'],
    properties: { contentType: 'application/json', messageId },
    persistent: true,
    mandatory: true,
  })
}

it('carries the delivery’s application headers onto the hop and leaves out its x-acemq-* headers, whatever their case', async () => {
  const pipeline = await build()
  await publishRaw(
    {
      'x-acemq-route': 'a,b',
      'X-AceMQ-Legacy': 'from an old library',
      'x-AcEmQ-other': 'mixed case',
      'x-tenant': 't-1',
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    },
    'raw-1',
  )
  await eventually(() => pipeline.completed === 1, 5_000, 'the run completed')
  const [hop] = transport.hops
  const names = Object.keys(hop?.headers ?? {})
  expect(names).toEqual(expect.arrayContaining(['x-tenant', 'traceparent']))
  expect(names.filter((name) => /^x-acemq-/i.test(name) && name !== name.toLowerCase())).toEqual([])
  expect(hop?.headers['x-tenant']).toBe('t-1')
  expect(arrived[0]?.headers).toMatchObject({ 'x-tenant': 't-1' })
  expect(hop).toMatchObject({
    exchange: 'p',
    routingKey: 'b',
    properties: { contentType: 'application/json', messageId: 'raw-1' },
    persistent: true,
    mandatory: true,
  })
})

it('gives a hop of a message that carried no first-seen time or origin the hop’s time and the connection’s origin', async () => {
  const pipeline = await build()
  const before = Date.now()
  await publishRaw({ 'x-acemq-route': 'a,b' }, 'raw-2')
  await eventually(() => pipeline.completed === 1, 5_000, 'the run completed')
  const envelope = arrived[0]?.envelope
  expect(envelope?.origin).toBe('shop@test')
  expect(envelope?.firstSeen).toBeGreaterThanOrEqual(before)
  expect(envelope?.firstSeen).toBeLessThanOrEqual(Date.now())
  expect(envelope).toMatchObject({ id: 'raw-2', causation: 'raw-2', attempt: 1 })
})

it('sets the message id of a hop whose run id is 255 bytes long, the most a message id holds', async () => {
  const pipeline = await build()
  const id = 'r'.repeat(255)
  await pipeline.send({ n: 1 }, { id })
  await eventually(() => pipeline.completed === 1, 5_000, 'the run completed')
  expect(transport.hops[0]?.properties).toEqual({ contentType: 'application/json', messageId: id })
})

it('leaves the message id off a hop whose run id is over 255 bytes (taken from another library’s header)', async () => {
  const pipeline = await build()
  await publishRaw({ 'x-acemq-route': 'a,b', 'x-acemq-id': 'r'.repeat(300) }, 'raw-3')
  await eventually(() => pipeline.completed === 1, 5_000, 'the run completed')
  expect(transport.hops[0]?.properties).toEqual({ contentType: 'application/json' })
})

it('never lets a __proto__ header of a delivery reach the hop’s headers', async () => {
  const pipeline = await build()
  const headers = JSON.parse(
    '{"__proto__": {"polluted": "yes"}, "x-acemq-route": "a,b"}',
  ) as Record<string, unknown>
  await publishRaw(headers, 'raw-4')
  await eventually(() => pipeline.completed === 1, 5_000, 'the run completed')
  const hop = transport.hops[0]?.headers as Record<string, unknown>
  expect(Object.getPrototypeOf(hop)).toBe(Object.prototype)
  expect(hop['polluted']).toBeUndefined()
})

describe('a route entry', () => {
  it('may name a step’s queue: the hop goes through the pipeline’s exchange to that step', async () => {
    const pipeline = await build()
    await publishRaw({ 'x-acemq-route': 'p.a,p.b', 'x-acemq-route-position': 0 }, 'raw-5')
    await eventually(() => pipeline.completed === 1, 5_000, 'the run completed')
    expect(transport.hops.map((hop) => [hop.exchange, hop.routingKey])).toEqual([['p', 'b']])
    expect(arrived).toHaveLength(1)
  })

  it('whose position names another step gives way to the first entry naming the queue it arrived on', async () => {
    const pipeline = await build()
    await publishRaw({ 'x-acemq-route': 'a,b', 'x-acemq-route-position': 1 }, 'raw-6')
    await publishRaw({ 'x-acemq-route': 'p.a,p.b', 'x-acemq-route-position': 1 }, 'raw-7')
    await eventually(() => pipeline.completed === 2, 5_000, 'the runs completed')
    expect(arrived.map((a) => a.envelope.id).sort()).toEqual(['raw-6', 'raw-7'])
  })

  it('naming a queue outside the pipeline sends the hop there on the default exchange', async () => {
    const pipeline = await build()
    await mq.applyTopology(Topology.define().queue('audit.log'))
    await publishRaw({ 'x-acemq-route': 'a,audit.log' }, 'raw-8')
    await eventually(() => transport.messageCount('audit.log') === 1, 5_000, 'the hop out')
    expect(transport.hops.map((hop) => [hop.exchange, hop.routingKey])).toEqual([['', 'audit.log']])
    expect([pipeline.completed, pipeline.endedEarly]).toEqual([0, 0])
  })

  it('naming a queue outside the pipeline that does not exist parks the step’s message', async () => {
    await build()
    await publishRaw({ 'x-acemq-route': 'a,audit.gone' }, 'raw-9')
    await eventually(() => transport.messageCount('p.a.parked') === 1, 5_000, 'parked')
    expect(headerString(transport.peek('p.a.parked')[0]?.headers['x-acemq-error'])).toBe(
      "the route's next step names the queue 'audit.gone', which does not exist",
    )
  })

  it('that can be no queue dead-letters the step’s message, saying why', async () => {
    // What the step's handling failed with, as the instrumentation is told.
    const failures: unknown[] = []
    mq.setInstrumentation({
      publishStarted: () => undefined,
      processStarted: () => ({
        run: (fn) => fn(),
        handled: (_, error) => void (error === undefined || failures.push(error)),
        retried: () => undefined,
        setAside: () => undefined,
        end: () => undefined,
      }),
    })
    await build()
    await publishRaw({ 'x-acemq-route': `a,${'x'.repeat(300)}` }, 'raw-10')
    await publishRaw({ 'x-acemq-route': 'a,amq.bad' }, 'raw-11')
    await eventually(() => transport.messageCount('p.a.dlq') === 2, 5_000, 'dead-lettered')
    const reasons = transport
      .peek('p.a.dlq')
      .map((m) => headerString(m.headers['x-acemq-error']) ?? '')
    expect(reasons[0]).toMatch(
      /^the message's route names no queue: the route's next step is 302 bytes in UTF-8/,
    )
    expect(reasons[1]).toMatch(
      /^the message's route names no queue: the route's next step must not start with 'amq\.'/,
    )
    expect(failures.map((error) => (error as Error).cause)).toEqual([
      expect.any(ConfigurationError),
      expect.any(ConfigurationError),
    ])
  })
})
