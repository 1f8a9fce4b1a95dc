import { afterEach, describe, expect, it } from 'vitest'
import {
  Ack,
  ConsumerOptions,
  InMemoryIdempotencyStore,
  UnroutableError,
  type AckResult,
  type AceMq,
  type Envelope,
} from '@acemq/core'
import { readEnvelope } from '@acemq/core/spi'
import { eventually } from '../helpers/eventually.js'
import { uniqueName } from '../services/services.js'
import type { InspectedMessage, ScenarioTarget } from './engine-scenarios.js'
import { ScenarioQueue } from './scenario-queue.js'

function envelopeOf(message: InspectedMessage, queue: string): Envelope {
  return readEnvelope(message.headers, { messageId: message.messageId, routingKey: queue }).envelope
}

/** Waits long enough for a message that would loop to have looped a few times. */
function settle(ms = 300): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/**
 * Interceptors (docs/design.md §22) on every transport: the same order and the same outcomes on
 * the in-memory one and the real broker. Each scenario uses its own queue.
 */
export function interceptorScenarios(name: string, target: ScenarioTarget): void {
  describe(`interceptors on ${name}`, () => {
    const scenario = new ScenarioQueue(target, 'intercept')
    const reports: { readonly error: unknown; readonly context: string }[] = []

    afterEach(async () => {
      reports.splice(0)
      await scenario.close()
    })

    function open(): Promise<{ mq: AceMq; q: string }> {
      return scenario.open({ onError: (error, context) => reports.push({ error, context }) })
    }

    function probe(): ScenarioQueue['probe'] {
      return scenario.probe
    }

    it('runs every phase in ascending order, the connection first among equals, and an afterHandle may replace the Ack', async () => {
      const { mq, q } = await open()
      const seen: string[] = []
      mq.intercept({
        order: 20,
        beforeHandle: () => void seen.push('before:connection-20'),
        afterHandle: (_m, ack) => void seen.push(`after:connection-20:${ack.kind}`),
      })
      mq.intercept({
        order: 10,
        beforeHandle: () => void seen.push('before:connection-10'),
        afterHandle: (): AckResult => {
          seen.push('after:connection-10')
          return Ack.deadLetter('the audit says no')
        },
      })
      const own = ConsumerOptions.defaults().withInterceptors({
        order: 10,
        beforeHandle: () => void seen.push('before:consumer-10'),
      })
      await scenario.consume(mq, q, own, () => void seen.push('handler'))
      await mq.publisher('', q).send({ n: 1 })
      await eventually(async () => (await probe().count(`${q}.dlq`)) === 1, 10_000, 'the dlq copy')
      expect(seen).toEqual([
        'before:connection-10',
        'before:consumer-10',
        'before:connection-20',
        'handler',
        'after:connection-10',
        'after:connection-20:dead-letter',
      ])
      const copy = (await probe().get(`${q}.dlq`)) as InspectedMessage
      expect(envelopeOf(copy, q).error).toBe('the audit says no')
    })

    it('moves a refused message to {q}.dlq once with the reason, never runs the handler, and health counts it', async () => {
      const { mq, q } = await open()
      let handled = 0
      let asked = 0
      mq.intercept({
        name: 'tenant-check',
        beforeHandle: (m) => {
          asked++
          return m.headers['x-tenant'] === 'acme' ? undefined : { refuse: 'unknown tenant' }
        },
      })
      await scenario.consume(mq, q, ConsumerOptions.defaults(), () => void handled++)
      await mq.publisher('', q).send({ n: 1 }, { headers: { 'x-tenant': 'initech' } })
      await eventually(async () => (await probe().count(`${q}.dlq`)) === 1, 10_000, 'the dlq copy')
      await settle()
      expect(asked).toBe(1)
      expect(handled).toBe(0)
      expect(await probe().count(q)).toBe(0)
      const copy = (await probe().get(`${q}.dlq`)) as InspectedMessage
      expect(envelopeOf(copy, q).error).toBe('an interceptor refused it: unknown tenant')
      expect(copy.headers['x-tenant']).toBe('initech')
      const consumersReport = (await mq.health()).reports.find((r) => r.name === 'consumers')
      expect(consumersReport?.details['refused']).toBe('1')
    })

    it('refuses a message whose beforeHandle throws, the same way, without a requeue loop', async () => {
      const { mq, q } = await open()
      let asked = 0
      mq.intercept({
        beforeHandle: () => {
          asked++
          throw new Error('the tenant service is down')
        },
      })
      let handled = 0
      await scenario.consume(mq, q, ConsumerOptions.defaults(), () => void handled++)
      await mq.publisher('', q).send({ n: 1 })
      await eventually(async () => (await probe().count(`${q}.dlq`)) === 1, 10_000, 'the dlq copy')
      await settle()
      expect(asked).toBe(1)
      expect(handled).toBe(0)
      const copy = (await probe().get(`${q}.dlq`)) as InspectedMessage
      expect(envelopeOf(copy, q).error).toBe(
        'an interceptor refused it: the tenant service is down',
      )
    })

    it('reports a throw after the handler or on error and changes nothing', async () => {
      const { mq, q } = await open()
      const errors: unknown[] = []
      mq.intercept({
        name: 'audit',
        afterHandle: () => {
          throw new Error('the audit log is full')
        },
        onError: (_m, error) => {
          errors.push(error)
          throw new Error('the error log is full')
        },
      })
      let runs = 0
      await scenario.consume(mq, q, ConsumerOptions.defaults().withRetryDelay(10), () => {
        runs++
        if (runs === 1) throw new Error('first run fails')
      })
      await mq.publisher('', q).send({ n: 1 })
      await eventually(() => runs === 2, 10_000, 'the retry ran')
      await eventually(async () => (await probe().count(q)) === 0, 5_000, 'the message acked')
      await settle()
      expect(runs).toBe(2)
      expect(await probe().count(`${q}.dlq`)).toBe(0)
      expect((errors[0] as Error).message).toBe('first run fails')
      const contexts = reports.map((r) => r.context)
      expect(contexts.filter((c) => c.startsWith('audit failed in onError'))).toHaveLength(1)
      expect(contexts.filter((c) => c.startsWith('audit failed in afterHandle'))).toHaveLength(2)
    })

    it('releases the idempotency claim of a refused message, so that a resend is handled', async () => {
      const { mq, q } = await open()
      let refuse = true
      mq.intercept({ beforeHandle: () => (refuse ? { refuse: 'not yet' } : undefined) })
      const handled: string[] = []
      const options = ConsumerOptions.defaults().idempotent(InMemoryIdempotencyStore.forOneDay())
      await scenario.consume(mq, q, options, (m) => void handled.push(m.envelope.id))
      const publisher = mq.publisher('', q)
      await publisher.send({ n: 1 }, { id: 'order-7' })
      await eventually(async () => (await probe().count(`${q}.dlq`)) === 1, 10_000, 'the dlq copy')
      refuse = false
      await publisher.send({ n: 1 }, { id: 'order-7' })
      // A claim left behind would put the resend back as in progress for the whole lease.
      await eventually(() => handled.length === 1, 3_000, 'the resend handled')
      expect(handled).toEqual(['order-7'])
    })

    it('lets beforePublish stamp headers and replace the envelope, then tells afterConfirm or onPublishError', async () => {
      const { mq, q } = await open()
      const confirmed: string[] = []
      const failed: unknown[] = []
      mq.intercept({
        order: 2,
        beforePublish: (p) => ({
          headers: { ...p.headers, 'x-stamp': `${p.headers['x-stamp'] as string}+2` },
        }),
        afterConfirm: (p) => void confirmed.push(`${p.routingKey}:${p.envelope.correlation}`),
        onPublishError: (_p, error) => void failed.push(error),
      })
      mq.intercept({
        order: 1,
        beforePublish: (p) => ({
          envelope: { ...p.envelope, correlation: 'stamped-correlation' },
          headers: { ...p.headers, 'x-stamp': '1' },
        }),
      })
      await mq.publisher('', q).send({ n: 1 }, { headers: { 'x-tenant': 'acme' } })
      await eventually(
        async () => (await probe().count(q)) === 1,
        5_000,
        'the message on the queue',
      )
      const sent = (await probe().get(q)) as InspectedMessage
      expect(sent.headers['x-stamp']).toBe('1+2')
      expect(sent.headers['x-tenant']).toBe('acme')
      expect(envelopeOf(sent, q).correlation).toBe('stamped-correlation')
      expect(JSON.parse(Buffer.from(sent.body).toString())).toEqual({ n: 1 })
      expect(confirmed).toEqual([`${q}:stamped-correlation`])
      const nowhere = uniqueName('intercept-nowhere')
      await expect(mq.publisher('', nowhere).send({ n: 2 })).rejects.toBeInstanceOf(UnroutableError)
      expect(failed).toHaveLength(1)
      expect(failed[0]).toBeInstanceOf(UnroutableError)
    })
  })
}
