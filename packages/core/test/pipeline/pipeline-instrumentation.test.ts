import { afterEach, beforeEach, expect, it } from 'vitest'
import {
  AceMq,
  ConfigurationError,
  ErrorCodes,
  InMemoryTransport,
  PublishFailedError,
  type Instrumentation,
} from '../../src/index.js'
import type {
  OutgoingMessage,
  PipelineRunInfo,
  PublishInfo,
  TransportPublishOptions,
} from '../../src/spi.js'
import { eventually } from '@acemq/testing'

// What a pipeline tells the instrumentation: each hop's publish (where it goes, the message id,
// correlation and headers, and how it ended) and each finished run (step, outcome, age).

/** An in-memory broker that fails the hops to `failing.routingKey` with `failing.error`. */
class HopTransport extends InMemoryTransport {
  failing: { routingKey: string; error: Error } | undefined
  refused = 0

  override async publish(
    message: OutgoingMessage,
    options?: TransportPublishOptions,
  ): Promise<void> {
    if (message.routingKey === this.failing?.routingKey) {
      this.refused++
      throw this.failing.error
    }
    await super.publish(message, options)
  }
}

interface Published {
  readonly info: PublishInfo
  readonly outcomes: string[]
}

let transport: HopTransport
let mq: AceMq
let published: Published[]
let finished: PipelineRunInfo[]

beforeEach(async () => {
  transport = new HopTransport()
  mq = await AceMq.connect(transport, { onError: () => undefined, origin: 'shop@test' })
  published = []
  finished = []
  const instrumentation: Instrumentation = {
    publishStarted: (info) => {
      const record: Published = { info, outcomes: [] }
      published.push(record)
      return { end: (outcome) => record.outcomes.push(outcome) }
    },
    processStarted: () => undefined,
    pipelineRunFinished: (info) => finished.push(info),
  }
  mq.setInstrumentation(instrumentation)
})

afterEach(async () => {
  await mq.close({ drainTimeout: 0 })
})

const hopsTo = (routingKey: string): Published[] =>
  published.filter((p) => p.info.exchange === 'p' && p.info.routingKey === routingKey)

function build(consume?: string[]) {
  return mq
    .pipeline<{ n: number }>('p')
    .step('a', (payload) => (payload.n > 0 ? payload : null))
    .step('b', (payload) => payload)
    .build(consume === undefined ? {} : { consume })
}

it('reports each finished run once its delivery is acked: the pipeline, run id, step, outcome and age', async () => {
  const pipeline = await build()
  await pipeline.send({ n: 1 }, { id: 'run-1', firstSeen: Date.now() - 5_000 })
  await eventually(() => pipeline.completed === 1, 5_000, 'the run completed')
  await pipeline.send({ n: 0 }, { id: 'run-2' })
  await eventually(() => pipeline.endedEarly === 1, 5_000, 'the run ended early')
  expect(finished.map(({ durationMs: _, ...info }) => info)).toEqual([
    { pipeline: 'p', runId: 'run-1', step: 'b', outcome: 'completed' },
    { pipeline: 'p', runId: 'run-2', step: 'a', outcome: 'ended_early' },
  ])
  expect(finished[0]?.durationMs).toBeGreaterThanOrEqual(5_000)
  expect(finished[0]?.durationMs).toBeLessThan(60_000)
  expect(finished[1]?.durationMs).toBeLessThan(5_000)
})

it('reports a hop’s publish to the pipeline’s exchange with the next step as routing key, the run’s id, correlation and route headers, confirmed', async () => {
  const pipeline = await build()
  await pipeline.send({ n: 1 }, { id: 'run-3', correlation: 'basket-3' })
  await eventually(() => pipeline.completed === 1, 5_000, 'the run completed')
  const [hop, ...others] = hopsTo('b')
  expect(others).toEqual([])
  expect(hop?.info).toMatchObject({
    exchange: 'p',
    routingKey: 'b',
    messageId: 'run-3',
    correlation: 'basket-3',
    headers: expect.objectContaining({
      'x-acemq-route': 'a,b',
      'x-acemq-route-position': { '!': 'int', value: 1 },
      'x-acemq-route-id': 'run-3',
    }) as unknown,
  })
  expect(hop?.outcomes).toEqual(['confirmed'])
})

it('ends a hop’s publish as failed when the broker refuses it for good, and parks the step’s message', async () => {
  const pipeline = await build()
  transport.failing = {
    routingKey: 'b',
    error: new ConfigurationError('the broker refuses this message'),
  }
  await pipeline.send({ n: 1 }, { id: 'run-4' })
  await eventually(() => transport.messageCount('p.a.parked') === 1, 5_000, 'the step parked')
  expect(hopsTo('b').map((p) => p.outcomes)).toEqual([['failed']])
})

it('ends a hop’s publish as unroutable when it still does not route as its step closes', async () => {
  const pipeline = await build()
  transport.failing = {
    routingKey: 'b',
    error: new PublishFailedError('the broker could not route the message (NO_ROUTE)', {
      code: ErrorCodes.UNROUTABLE,
    }),
  }
  await pipeline.send({ n: 1 }, { id: 'run-5' })
  // Tried, then tried again at once after its queue was declared again; now it waits.
  await eventually(() => transport.refused === 2, 5_000, 'the hop tried twice')
  expect(hopsTo('b').map((p) => p.outcomes)).toEqual([[]])
  await mq.close({ drainTimeout: 0 })
  expect(hopsTo('b').map((p) => p.outcomes)).toEqual([['unroutable']])
})
