import {
  Topology,
  type AceMq,
  type AceMqOptions,
  type Consumer,
  type ConsumerOptions,
  type Message,
} from '@acemq/core'
import { uniqueName } from '../services/services.js'
import {
  closeScenario,
  openScenario,
  type ScenarioConnection,
  type ScenarioTarget,
} from './engine-scenarios.js'

/**
 * One scenario's connection with a queue of its own (declared with its `.dlq` and `.parked`)
 * and the consumers it started; {@link close} removes them all.
 */
export class ScenarioQueue {
  readonly #target: ScenarioTarget
  readonly #prefix: string
  readonly #queues: string[] = []
  readonly #consumers: Consumer[] = []
  #connection: ScenarioConnection | undefined

  constructor(target: ScenarioTarget, prefix: string) {
    this.#target = target
    this.#prefix = prefix
  }

  /** Connects with `options` and declares a new queue. */
  async open(options: AceMqOptions = {}): Promise<{ mq: AceMq; q: string }> {
    this.#connection = await openScenario(this.#target, undefined, options)
    const q = uniqueName(this.#prefix)
    this.#queues.push(q)
    await this.#connection.mq.applyTopology(Topology.define().queueWithDeadLetter(q))
    return { mq: this.#connection.mq, q }
  }

  /** The probe beside the open connection. */
  get probe(): ScenarioConnection['probe'] {
    if (this.#connection === undefined) throw new Error('ScenarioQueue.probe: open() first')
    return this.#connection.probe
  }

  /** Starts a consumer of `q`, closed by {@link close}. */
  async consume(
    mq: AceMq,
    q: string,
    options: ConsumerOptions,
    handler: (m: Message<unknown>) => unknown,
  ): Promise<void> {
    this.#consumers.push(await mq.consume(q, options, async (m) => (await handler(m)) as never))
  }

  /** Closes the consumers and the connection, and deletes the queues. */
  async close(): Promise<void> {
    for (const consumer of this.#consumers.splice(0)) await consumer.close({ drainTimeout: 0 })
    if (this.#connection !== undefined) await closeScenario(this.#connection, this.#queues)
    this.#connection = undefined
  }
}
