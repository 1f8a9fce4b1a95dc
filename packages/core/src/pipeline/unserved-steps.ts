import { describeError } from '../errors.js'
import { ErrorCodes, errorCodeOf } from '../error-codes.js'
import type { HealthReport } from '../health/health.js'
import type { Transport } from '../transport/transport.js'

/** How long a queue found to exist is taken to exist without asking again. */
const SEEN_FOR_MS = 1_000

/**
 * The queues of steps a pipeline's runs still name but this version of it does not have (a step
 * renamed or removed between deploys), as far as this process has met them: the hops it handed
 * there, and the steps `build({ formerSteps })` names. Its health report, `pipeline:{name}`, is
 * DEGRADED while any of them holds runs, since no consumer of this version will take them
 * (docs/design.md §15). Internal to core.
 */
export class UnservedSteps {
  readonly #name: string
  readonly #steps: readonly string[]
  readonly #transport: Transport
  /** Queue names, in the order they were met. */
  readonly #queues = new Set<string>()
  /** When each queue was last found to exist. */
  readonly #seen = new Map<string, number>()

  constructor(name: string, steps: readonly string[], transport: Transport) {
    this.#name = name
    this.#steps = steps
    this.#transport = transport
  }

  /** Watches `queue` from now on. */
  watch(queue: string): void {
    this.#queues.add(queue)
  }

  /**
   * Why a hop to `queue`, for the route entry `entry`, can never be routed: the queue does not
   * exist. Undefined when it exists (it is watched from now on) or when the transport cannot
   * tell (no `queueLength`, or it failed otherwise: the hop is tried, and held if it fails).
   */
  async missing(entry: string, queue: string): Promise<string | undefined> {
    const { queueLength } = this.#transport
    if (queueLength === undefined) return undefined
    // One passive declare a second per queue at most, however many runs hop there.
    const seen = this.#seen.get(queue)
    if (seen !== undefined && Date.now() - seen < SEEN_FOR_MS) return undefined
    try {
      await queueLength.call(this.#transport, queue)
      this.#seen.set(queue, Date.now())
      this.watch(queue)
      return undefined
    } catch (error) {
      if (errorCodeOf(error) !== ErrorCodes.NOT_FOUND) return undefined
      return entry === queue
        ? `the route's next step names the queue '${queue}', which does not exist`
        : `the route's next step '${entry}' is no step of pipeline '${this.#name}' (${this.#steps.join(', ')}), and its queue '${queue}' does not exist: a step renamed or removed since the run was sent`
    }
  }

  /** `pipeline:{name}`: DEGRADED while a watched queue holds messages. */
  async report(): Promise<HealthReport> {
    const waiting: string[] = []
    const unknown: string[] = []
    const { queueLength } = this.#transport
    for (const queue of this.#queues) {
      if (queueLength === undefined) {
        unknown.push(queue)
        continue
      }
      try {
        const length = await queueLength.call(this.#transport, queue)
        if (length > 0) waiting.push(`${queue}=${length}`)
      } catch (error) {
        // Deleted: nothing waits there any more.
        if (errorCodeOf(error) === ErrorCodes.NOT_FOUND) this.#queues.delete(queue)
        else unknown.push(`${queue} (${describeError(error)})`)
      }
    }
    const details: Record<string, string> = { steps: this.#steps.join(',') }
    if (waiting.length > 0) details['unserved'] = waiting.join(',')
    if (unknown.length > 0) details['uncounted'] = unknown.join(',')
    return {
      name: `pipeline:${this.#name}`,
      status: waiting.length > 0 ? 'DEGRADED' : 'UP',
      details,
    }
  }
}
