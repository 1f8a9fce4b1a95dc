import { afterEach, describe, expect, it } from 'vitest'
import {
  Ack,
  ConsumerOptions,
  FatalError,
  RetryPolicy,
  type AceMq,
  type DeadLetterReport,
} from '@acemq/core'
import { eventually } from '../helpers/eventually.js'
import type { ScenarioTarget } from './engine-scenarios.js'
import { ScenarioQueue } from './scenario-queue.js'

/** The process warnings printed while a scenario runs (the default `onError` prints them). */
function watchWarnings(): { readonly lines: string[]; stop(): void } {
  const lines: string[] = []
  const listener = (warning: Error & { code?: string }): void => {
    if (warning.code === 'ACEMQ_DEAD_LETTERED') lines.push(warning.message)
  }
  process.on('warning', listener)
  return { lines, stop: () => process.off('warning', listener) }
}

/**
 * Loud dead letters (docs/design.md §13) on every transport: with default options, every message
 * a consumer moves to `.dlq` or `.parked` is reported, and `onDeadLetter` hears each one with
 * how it got there.
 */
export function deadLetterScenarios(name: string, target: ScenarioTarget): void {
  describe(`dead-letter reports on ${name}`, () => {
    const scenario = new ScenarioQueue(target, 'dead-letter')
    let warnings: ReturnType<typeof watchWarnings> | undefined

    afterEach(async () => {
      warnings?.stop()
      await scenario.close()
    })

    function open(
      onDeadLetter?: (report: DeadLetterReport) => void,
    ): Promise<{ mq: AceMq; q: string }> {
      return scenario.open(onDeadLetter ? { onDeadLetter } : {})
    }

    it('prints a warning for a message rejected to {q}.dlq with FatalError, with default options', async () => {
      warnings = watchWarnings()
      const { mq, q } = await open()
      await scenario.consume(mq, q, ConsumerOptions.defaults(), () => {
        throw new FatalError('order has no customer')
      })
      await mq.publisher('', q).send({ n: 1 }, { id: 'order-fatal' })
      await eventually(() => warnings?.lines.length === 1, 10_000, 'one dead-letter warning')
      expect(warnings.lines).toEqual([
        `message order-fatal from '${q}' was moved to '${q}.dlq' (rejected): order has no customer`,
      ])
    })

    it('prints a warning for a parked message, with default options', async () => {
      warnings = watchWarnings()
      const { mq, q } = await open()
      await scenario.consume(mq, q, ConsumerOptions.defaults(), () => Ack.park('needs a human'))
      await mq.publisher('', q).send({ n: 1 }, { id: 'order-parked' })
      await eventually(() => warnings?.lines.length === 1, 10_000, 'one dead-letter warning')
      expect(warnings.lines).toEqual([
        `message order-parked from '${q}' was moved to '${q}.parked' (parked): needs a human`,
      ])
    })

    it('tells onDeadLetter of every kind of set-aside: retries run out, FatalError, a refusal and a park', async () => {
      const reports: DeadLetterReport[] = []
      const { mq, q } = await open((report) => reports.push(report))
      mq.intercept({
        beforeHandle: (m) => (m.envelope.id === 'refused' ? { refuse: 'not here' } : undefined),
      })
      await scenario.consume(
        mq,
        q,
        ConsumerOptions.defaults().withRetry(RetryPolicy.fixed(2, 10)),
        (m) => {
          if (m.envelope.id === 'exhausted') throw new Error('still down')
          if (m.envelope.id === 'fatal') throw new FatalError('bad order')
          if (m.envelope.id === 'parked') return Ack.park('look at it')
          return undefined
        },
      )
      const publisher = mq.publisher('', q)
      for (const id of ['exhausted', 'fatal', 'refused', 'parked']) await publisher.send({}, { id })
      await eventually(() => reports.length === 4, 10_000, 'four reports')
      const byId = new Map(reports.map((r) => [r.messageId, r]))
      expect(byId.get('exhausted')).toEqual({
        queue: q,
        target: `${q}.dlq`,
        messageId: 'exhausted',
        outcome: 'dead_lettered',
        reason: 'gave up after 2 attempt(s): still down',
        attempt: 2,
      })
      expect(byId.get('fatal')).toMatchObject({ outcome: 'rejected', target: `${q}.dlq` })
      expect(byId.get('refused')).toMatchObject({
        outcome: 'refused',
        target: `${q}.dlq`,
        reason: 'an interceptor refused it: not here',
      })
      expect(byId.get('parked')).toMatchObject({ outcome: 'parked', target: `${q}.parked` })
    })
  })
}
