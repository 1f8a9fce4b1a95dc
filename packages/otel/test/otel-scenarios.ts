import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, context, trace } from '@opentelemetry/api'
import {
  AceMq,
  ConsumerOptions,
  InMemoryIdempotencyStore,
  PublishingPausedError,
  RetryPolicy,
  Topology,
  UnroutableError,
  withSchema,
  type Consumer,
  type StandardSchemaV1,
  type Headers,
} from '@acemq/core'
import { eventually, uniqueName } from '@acemq/testing'
import { ACEMQ_ATTRIBUTES, ACEMQ_EVENTS, ACEMQ_METRICS, instrument } from '../src/index.js'
import { OtelHarness, useOtelGlobals } from './otel-harness.js'

/** What each transport under test provides. */
export interface OtelTarget {
  connect(): Promise<AceMq>
  /** Removes queues a test declared (the broker keeps them otherwise). */
  deleteQueues(queues: readonly string[]): Promise<void>
}

function deferred(): { readonly promise: Promise<void>; readonly resolve: () => void } {
  let resolve!: () => void
  const promise = new Promise<void>((r) => (resolve = r))
  return { promise, resolve }
}

/**
 * What `@acemq/otel` promises, run against every transport: the in-memory one and the real
 * broker. Each test uses its own queue.
 */
export function otelScenarios(name: string, target: OtelTarget): void {
  describe(`@acemq/otel on ${name}`, () => {
    useOtelGlobals()
    let otel: OtelHarness
    let mq: AceMq
    let uninstall: () => void
    let queues: string[] = []
    let consumers: Consumer[] = []

    beforeEach(async () => {
      otel = new OtelHarness()
      mq = await target.connect()
      uninstall = instrument(mq, {
        tracerProvider: otel.tracerProvider,
        meterProvider: otel.meterProvider,
      })
    })

    afterEach(async () => {
      for (const consumer of consumers) await consumer.close({ drainTimeout: 1_000 })
      consumers = []
      uninstall()
      await mq.close({ drainTimeout: 1_000 })
      await target.deleteQueues(queues)
      queues = []
      await otel.shutdown()
    })

    async function declare(policy = RetryPolicy.none()): Promise<string> {
      const queue = uniqueName('otel')
      queues.push(queue, `${queue}.dlq`, `${queue}.parked`)
      await mq.applyTopology(Topology.define().queueWithRetry(queue, policy))
      return queue
    }

    async function consume(
      queue: string,
      options: ConsumerOptions,
      handler: Parameters<AceMq['consume']>[2],
    ): Promise<void> {
      consumers.push(await mq.consume(queue, options, handler))
    }

    it('a publish and its consume form one trace, whatever context the delivery arrives in', async () => {
      const queue = await declare()
      let received: Headers | undefined
      // The consumer starts inside an unrelated span, and the publish happens inside another:
      // neither may become the process span's parent.
      const unrelated = otel.tracer.startSpan('unrelated', {}, ROOT_CONTEXT)
      await context.with(trace.setSpan(ROOT_CONTEXT, unrelated), () =>
        consume(queue, ConsumerOptions.defaults(), async (message) => {
          received = message.headers
        }),
      )
      const caller = otel.tracer.startSpan('caller', {}, ROOT_CONTEXT)
      await context.with(trace.setSpan(ROOT_CONTEXT, caller), () =>
        mq.publisher('', queue).send({ id: 'o-1' }, { id: 'm-1', correlation: 'checkout-42' }),
      )
      caller.end()
      unrelated.end()
      await eventually(
        () => otel.spans(`${queue} process`).length === 1,
        10_000,
        'the process span',
      )

      const [publish] = otel.spans(`${queue} publish`)
      const [process] = otel.spans(`${queue} process`)
      expect(publish?.kind).toBe(SpanKind.PRODUCER)
      expect(process?.kind).toBe(SpanKind.CONSUMER)
      // The publish continues its caller's trace; the process span continues the publish.
      expect(publish?.parentSpanContext?.spanId).toBe(caller.spanContext().spanId)
      expect(process?.spanContext().traceId).toBe(publish?.spanContext().traceId)
      expect(process?.parentSpanContext?.spanId).toBe(publish?.spanContext().spanId)
      expect(process?.spanContext().traceId).not.toBe(unrelated.spanContext().traceId)
      expect(received?.['traceparent']).toBe(
        `00-${publish?.spanContext().traceId}-${publish?.spanContext().spanId}-01`,
      )

      expect(publish?.attributes).toMatchObject({
        [ACEMQ_ATTRIBUTES.system]: 'rabbitmq',
        [ACEMQ_ATTRIBUTES.operationType]: 'publish',
        [ACEMQ_ATTRIBUTES.destinationName]: queue,
        [ACEMQ_ATTRIBUTES.routingKey]: queue,
        [ACEMQ_ATTRIBUTES.messageId]: 'm-1',
        [ACEMQ_ATTRIBUTES.conversationId]: 'checkout-42',
        [ACEMQ_ATTRIBUTES.outcome]: 'confirmed',
      })
      expect(process?.attributes).toMatchObject({
        [ACEMQ_ATTRIBUTES.system]: 'rabbitmq',
        [ACEMQ_ATTRIBUTES.operationType]: 'process',
        [ACEMQ_ATTRIBUTES.destinationName]: queue,
        [ACEMQ_ATTRIBUTES.messageId]: 'm-1',
        [ACEMQ_ATTRIBUTES.conversationId]: 'checkout-42',
        [ACEMQ_ATTRIBUTES.attempt]: 1,
        [ACEMQ_ATTRIBUTES.outcome]: 'acked',
      })
      expect(publish?.status.code).toBe(SpanStatusCode.UNSET)
      expect(process?.status.code).toBe(SpanStatusCode.UNSET)

      const publishLabels = { exchange: '', 'routing.key': queue, outcome: 'confirmed' }
      expect(await otel.sum(ACEMQ_METRICS.publishTotal, publishLabels)).toBe(1)
      expect((await otel.histogram(ACEMQ_METRICS.publishDuration, publishLabels))?.count).toBe(1)
      await eventually(
        async () => (await otel.sum(ACEMQ_METRICS.consumeTotal, { queue, outcome: 'acked' })) === 1,
        5_000,
        'the acked count',
      )
      const handled = await otel.histogram(ACEMQ_METRICS.consumeDuration, {
        queue,
        outcome: 'acked',
      })
      expect(handled?.count).toBe(1)
      // Seconds, not milliseconds: a no-op handler takes far less than one.
      expect(handled?.sum).toBeLessThan(1)
    })

    it('a span created inside the handler is a child of the process span', async () => {
      const queue = await declare()
      await consume(queue, ConsumerOptions.defaults(), async () => {
        await new Promise((resolve) => setTimeout(resolve, 1))
        otel.tracer.startSpan('charge the card').end()
      })
      await mq.publisher('', queue).send({})
      await eventually(() => otel.spans('charge the card').length === 1, 10_000, 'the work span')
      await eventually(() => otel.spans(`${queue} process`).length === 1, 5_000, 'the process span')
      const [work] = otel.spans('charge the card')
      const [process] = otel.spans(`${queue} process`)
      expect(work?.parentSpanContext?.spanId).toBe(process?.spanContext().spanId)
      expect(work?.spanContext().traceId).toBe(process?.spanContext().traceId)
    })

    it('a message that exhausts its retries is counted retried twice, then dead-lettered once', async () => {
      const policy = RetryPolicy.fixed(3, 10)
      const queue = await declare(policy)
      await consume(queue, ConsumerOptions.defaults().withRetry(policy), async () => {
        throw new Error('the card was declined')
      })
      await mq.publisher('', queue).send({})
      await eventually(
        async () =>
          (await otel.sum(ACEMQ_METRICS.consumeTotal, { queue, outcome: 'dead_lettered' })) === 1,
        10_000,
        'the dead-lettered count',
      )

      expect(await otel.sum(ACEMQ_METRICS.consumeTotal, { queue, outcome: 'retried' })).toBe(2)
      expect(await otel.sum(ACEMQ_METRICS.consumeTotal, { queue })).toBe(3)
      expect(await otel.sum(ACEMQ_METRICS.messagesRetriedTotal, { queue })).toBe(2)
      expect(
        await otel.sum(ACEMQ_METRICS.messagesDeadLetteredTotal, {
          queue,
          outcome: 'dead_lettered',
        }),
      ).toBe(1)
      expect(await otel.sum(ACEMQ_METRICS.messagesDeadLetteredTotal, { queue })).toBe(1)
      // Handler time is recorded for every attempt, under the outcome it led to.
      expect(await otel.sum(ACEMQ_METRICS.consumeDuration, { queue, outcome: 'retried' })).toBe(2)

      const [publish] = otel.spans(`${queue} publish`)
      const processes = otel.spans(`${queue} process`)
      expect(processes.map((s) => s.attributes[ACEMQ_ATTRIBUTES.attempt])).toEqual([1, 2, 3])
      expect(processes.map((s) => s.attributes[ACEMQ_ATTRIBUTES.outcome])).toEqual([
        'retried',
        'retried',
        'dead_lettered',
      ])
      // The traceparent travels with every retry: each attempt is a child of the publish.
      for (const process of processes) {
        expect(process.parentSpanContext?.spanId).toBe(publish?.spanContext().spanId)
        expect(process.status.code).toBe(SpanStatusCode.ERROR)
      }
      const events = processes.flatMap((s) => s.events)
      const retried = events.filter((e) => e.name === ACEMQ_EVENTS.retried)
      const deadLettered = events.filter((e) => e.name === ACEMQ_EVENTS.deadLettered)
      expect(retried).toHaveLength(2)
      for (const event of retried) {
        expect(event.attributes).toEqual({
          [ACEMQ_ATTRIBUTES.retryDelayMs]: 10,
          [ACEMQ_ATTRIBUTES.inBroker]: false,
        })
      }
      expect(deadLettered).toHaveLength(1)
      expect(deadLettered[0]?.attributes).toEqual({
        [ACEMQ_ATTRIBUTES.outcome]: 'dead_lettered',
        [ACEMQ_ATTRIBUTES.targetQueue]: `${queue}.dlq`,
        [ACEMQ_ATTRIBUTES.reason]: 'gave up after 3 attempt(s): the card was declined',
      })
      expect(processes[2]?.status.message).toBe('gave up after 3 attempt(s): the card was declined')
    })

    it('a message its schema refuses is counted invalid once, dead-lettered and never retried', async () => {
      const policy = RetryPolicy.fixed(3, 10)
      const queue = await declare(policy)
      const needsId: StandardSchemaV1<unknown, { id: string }> = {
        '~standard': {
          version: 1,
          vendor: 'test',
          validate: (value) =>
            typeof (value as { id?: unknown }).id === 'string'
              ? { value: value as { id: string } }
              : { issues: [{ message: 'Required', path: ['id'] }] },
        },
      }
      await consume(
        queue,
        ConsumerOptions.defaults().withRetry(policy),
        withSchema(needsId, () => undefined),
      )
      await mq.publisher('', queue).send({})
      await eventually(
        async () =>
          (await otel.sum(ACEMQ_METRICS.consumeTotal, { queue, outcome: 'invalid' })) === 1,
        10_000,
        'the invalid count',
      )
      expect(await otel.sum(ACEMQ_METRICS.consumeTotal, { queue })).toBe(1)
      expect(
        await otel.sum(ACEMQ_METRICS.messagesDeadLetteredTotal, { queue, outcome: 'invalid' }),
      ).toBe(1)
      const [process] = otel.spans(`${queue} process`)
      expect(process?.attributes[ACEMQ_ATTRIBUTES.outcome]).toBe('invalid')
      const [event] = process?.events.filter((e) => e.name === ACEMQ_EVENTS.deadLettered) ?? []
      expect(event?.attributes?.[ACEMQ_ATTRIBUTES.targetQueue]).toBe(`${queue}.dlq`)
      expect(event?.attributes?.[ACEMQ_ATTRIBUTES.reason]).toBe(
        'invalid payload (1 issue(s)): id: Required',
      )
    })

    it('an in-progress put-back is counted in_progress, never retried', async () => {
      const store = new InMemoryIdempotencyStore()
      const id = uniqueName('order')
      // Someone else holds a live claim on the id.
      expect(await store.share().tryClaim(id)).toBe('claimed')
      const queue = await declare(RetryPolicy.fixed(3, 10))
      let calls = 0
      await consume(
        queue,
        ConsumerOptions.defaults().idempotent(store).withInProgressDelay(50),
        async () => {
          calls++
        },
      )
      await mq.publisher('', queue).send({}, { id })
      await eventually(
        async () =>
          (await otel.sum(ACEMQ_METRICS.consumeTotal, { queue, outcome: 'in_progress' })) >= 1,
        10_000,
        'an in-progress count',
      )
      // The other owner finishes: the next look is a duplicate, acked without running.
      await store.confirm(id)
      await eventually(
        async () => (await otel.sum(ACEMQ_METRICS.consumeTotal, { queue, outcome: 'acked' })) === 1,
        10_000,
        'the acked count',
      )

      expect(calls).toBe(0)
      expect(await otel.sum(ACEMQ_METRICS.consumeTotal, { queue, outcome: 'retried' })).toBe(0)
      expect(await otel.sum(ACEMQ_METRICS.messagesRetriedTotal, { queue })).toBe(0)
      // The handler never ran, so no handler time was recorded.
      expect(await otel.sum(ACEMQ_METRICS.consumeDuration, { queue })).toBe(0)
      const inProgress = otel
        .spans(`${queue} process`)
        .filter((s) => s.attributes[ACEMQ_ATTRIBUTES.outcome] === 'in_progress')
      expect(inProgress.length).toBeGreaterThanOrEqual(1)
      for (const span of inProgress) {
        expect(span.status.code).toBe(SpanStatusCode.UNSET)
        expect(span.events).toEqual([])
        expect(span.attributes[ACEMQ_ATTRIBUTES.attempt]).toBe(1)
      }
    })

    it('a publish refused while paused is counted refused, and an unroutable one unroutable', async () => {
      const queue = await declare()
      mq.pausePublishing()
      await expect(mq.publisher('', queue).send({})).rejects.toBeInstanceOf(PublishingPausedError)
      mq.resumePublishing()
      const nowhere = uniqueName('otel.nowhere')
      await expect(mq.publisher('', nowhere).send({})).rejects.toBeInstanceOf(UnroutableError)

      const refused = { exchange: '', 'routing.key': queue, outcome: 'refused' }
      const unroutable = { exchange: '', 'routing.key': nowhere, outcome: 'unroutable' }
      expect(await otel.sum(ACEMQ_METRICS.publishTotal, refused)).toBe(1)
      expect(await otel.sum(ACEMQ_METRICS.publishDuration, refused)).toBe(1)
      expect(await otel.sum(ACEMQ_METRICS.publishTotal, unroutable)).toBe(1)
      expect(await otel.sum(ACEMQ_METRICS.publishTotal, { outcome: 'confirmed' })).toBe(0)

      const [paused] = otel.spans(`${queue} publish`)
      expect(paused?.status.code).toBe(SpanStatusCode.ERROR)
      expect(paused?.attributes[ACEMQ_ATTRIBUTES.outcome]).toBe('refused')
      expect(paused?.attributes[ACEMQ_ATTRIBUTES.errorType]).toBe('ACEMQ_PUBLISHING_PAUSED')
      const [lost] = otel.spans(`${nowhere} publish`)
      expect(lost?.status.code).toBe(SpanStatusCode.ERROR)
      expect(lost?.attributes[ACEMQ_ATTRIBUTES.errorType]).toBe('ACEMQ_UNROUTABLE')
      expect(lost?.events.map((e) => e.name)).toEqual(['exception'])
    })

    it('the in-flight gauge reports mq.inFlight', async () => {
      const queue = await declare()
      const gate = deferred()
      await consume(queue, ConsumerOptions.defaults(), () => gate.promise)
      expect(await otel.gauge(ACEMQ_METRICS.consumeInFlight)).toBe(0)
      await mq.publisher('', queue).send({})
      await eventually(() => mq.inFlight === 1, 10_000, 'a running handler')
      expect(await otel.gauge(ACEMQ_METRICS.consumeInFlight)).toBe(1)
      gate.resolve()
      await eventually(() => mq.inFlight === 0, 5_000, 'the handler to settle')
      expect(await otel.gauge(ACEMQ_METRICS.consumeInFlight)).toBe(0)
    })

    it('after uninstall nothing is recorded and no trace context is added', async () => {
      const queue = await declare()
      uninstall()
      const seen: Headers[] = []
      await consume(queue, ConsumerOptions.defaults(), async (message) => {
        seen.push(message.headers)
      })
      await mq.publisher('', queue).send({})
      await eventually(() => seen.length === 1, 10_000, 'the delivery')
      await eventually(() => mq.inFlight === 0, 5_000, 'the settlement')

      expect(seen[0]?.['traceparent']).toBeUndefined()
      expect(otel.spans()).toEqual([])
      expect(await otel.sum(ACEMQ_METRICS.publishTotal)).toBe(0)
      expect(await otel.sum(ACEMQ_METRICS.consumeTotal)).toBe(0)
      expect(await otel.gauge(ACEMQ_METRICS.consumeInFlight)).toBeUndefined()
    })
  })
}
