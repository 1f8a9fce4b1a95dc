import { type Instrumentation } from '@acemq/core'
import {
  rungQueueName,
  type ConsumeOutcome,
  type PipelineRunInfo,
  type ProcessInfo,
  type ProcessScope,
} from '@acemq/core/spi'
import { waitUntil } from './demo-context.js'
import { ms, say } from './print.js'

/** One delivery, from the moment the engine took it until it was settled. */
export interface Settlement {
  readonly id: string
  readonly queue: string
  readonly attempt: number
  readonly outcome: ConsumeOutcome
  /** False when the engine settled it without calling the handler (a duplicate, in progress). */
  readonly handlerRan: boolean
  /** The wait before the next attempt, when it was retried. */
  readonly waitedMs: number | undefined
  /** Where it waited: a broker rung queue, or undefined for the consumer. */
  readonly rung: string | undefined
  /** Why it was set aside, when it went to a dead-letter or parked queue. */
  readonly reason: string | undefined
}

/**
 * Prints what the engine decided for each delivery — the waits it chose, the rung it used, a
 * duplicate it acked, a message it put back — which a handler never sees.
 *
 * It plugs into the same seam as `@acemq/otel` (`mq.setInstrumentation`): the engine calls
 * `processStarted` for every delivery and reports on the returned scope until `end`.
 */
export class Narrator implements Instrumentation {
  readonly #settled: Settlement[] = []
  readonly #quiet = new Set<string>()
  readonly #finished = new Set<string>()
  readonly #triggers = new Set<() => void>()

  publishStarted(): undefined {
    return undefined
  }

  processStarted(info: ProcessInfo): ProcessScope {
    const id = info.messageId
    const tell = (text: string): void => say('engine', id, text)
    let handlerRan = false
    let waitedMs: number | undefined
    let rung: string | undefined
    let reason: string | undefined
    return {
      run: (fn) => fn(),
      handled: () => {
        handlerRan = true
      },
      retried: (delayMs, inBroker) => {
        waitedMs = delayMs
        if (inBroker) {
          rung = rungQueueName(info.queue, delayMs)
          tell(`retried: waits ${ms(delayMs)} in broker rung ${rung} (TTL, then back)`)
        } else {
          const next = info.attempt + 1
          tell(`retried: waited ${ms(delayMs)} in the consumer, sent as attempt ${next}`)
        }
      },
      setAside: (outcome, queue, why) => {
        reason = why
        tell(`${outcome === 'parked' ? 'parked' : 'dead-lettered'} to ${queue}: ${why}`)
      },
      end: (outcome) => {
        if (outcome === 'acked' && !handlerRan) {
          tell('duplicate: confirmed in the store already, acked without running the handler')
        } else if (outcome === 'acked' && !this.#quiet.has(info.queue)) {
          tell(`acked on attempt ${info.attempt}`)
        } else if (outcome === 'in_progress') {
          tell(`in progress elsewhere: put back, attempt ${info.attempt} unchanged`)
        }
        const { queue, attempt } = info
        this.#settled.push({ id, queue, attempt, outcome, handlerRan, waitedMs, rung, reason })
        for (const trigger of [...this.#triggers]) trigger()
      },
    }
  }

  /** A pipeline run finished: completed at its last step, or ended early. */
  pipelineRunFinished(info: PipelineRunInfo): void {
    const how = info.outcome === 'completed' ? 'completed' : 'ended early'
    say('engine', info.runId, `run ${how} at ${info.step}: ${info.pipeline}.${info.step} acked`)
    this.#finished.add(info.runId)
  }

  /** Resolves once the pipeline run `runId` has finished. */
  finished(runId: string): Promise<void> {
    return waitUntil(() => this.#finished.has(runId), `run ${runId} to finish`)
  }

  /** Stops printing the routine `acked` lines of `queue` (the demo's batch of orders). */
  quiet(queue: string): void {
    this.#quiet.add(queue)
  }

  /** Every settled delivery of message `id`, oldest first. */
  of(id: string): Settlement[] {
    return this.#settled.filter((s) => s.id === id)
  }

  /** How many deliveries of message `id` were settled with `outcome` so far. */
  count(id: string, outcome: ConsumeOutcome): number {
    return this.of(id).filter((s) => s.outcome === outcome).length
  }

  /**
   * Runs `action` the moment message `id` is settled with `outcome` for the `times`th time, in
   * the same turn as that settlement, so nothing the engine does next comes between the two;
   * resolves with what `action` resolves to. Fails after `timeoutMs` (its timer also keeps the
   * process alive meanwhile: the engine's own timers do not).
   */
  when<R>(
    id: string,
    outcome: ConsumeOutcome,
    times: number,
    action: () => Promise<R>,
    timeoutMs = 15_000,
  ): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      const deadline = setTimeout(() => {
        this.#triggers.delete(trigger)
        reject(new Error(`the demo waited ${timeoutMs} ms for ${id} to be ${outcome} ×${times}`))
      }, timeoutMs)
      const trigger = (): void => {
        if (this.count(id, outcome) < times) return
        this.#triggers.delete(trigger)
        clearTimeout(deadline)
        action().then(resolve, reject)
      }
      this.#triggers.add(trigger)
      trigger()
    })
  }

  /** Resolves once message `id` has been settled with `outcome` (`times` times). */
  settled(id: string, outcome: ConsumeOutcome, times = 1): Promise<void> {
    return waitUntil(() => this.count(id, outcome) >= times, `${id} to be ${outcome}`)
  }
}
