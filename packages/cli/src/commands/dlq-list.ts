import { ConfigurationError } from '@acemq/core'
import { validateQueueName, type Transport } from '@acemq/core/spi'
import { queueLength } from '../connection.js'
import { UsageError } from '../exit-codes.js'

/** The most partitions an ordered queue can have: where discovery stops looking. */
const MAX_PARTITIONS = 1_024

/** What a name given to `dlq list --queues` turned out to be. */
export interface NamedQueue {
  /** The name as given. */
  readonly name: string
  /**
   * `dead-letter`: a `.dlq` or `.parked` queue, listed as it is; `queue`: a queue, listed by its
   * dead-letter and parked queues; `ordered`: the partitions `{name}.0…` of an ordered queue;
   * `pipeline`: the step queues `{name}.{step}` of a pipeline (`--steps`); `missing`: none of these.
   */
  readonly kind: 'dead-letter' | 'queue' | 'ordered' | 'pipeline' | 'missing'
  /** The source queues it stands for (none for a dead-letter queue). */
  readonly sources: readonly string[]
}

/** How the names given are to be expanded where the broker cannot say. */
export interface ExpandOptions {
  /** Every name is an ordered queue of this many partitions. */
  readonly partitions?: number
  /** Every name is a pipeline with these steps. */
  readonly steps?: readonly string[]
}

/**
 * What `name` stands for, asking the broker with passive declares: the queue itself when it
 * exists, else the partitions `{name}.0`, `{name}.1`, … of an ordered queue while they exist.
 * A pipeline's steps cannot be found over AMQP (its queues have no common numbering): they are
 * named with `--steps`, and `--partitions` says an ordered queue's count outright.
 */
export async function expandName(
  transport: Transport,
  name: string,
  options: ExpandOptions,
): Promise<NamedQueue> {
  if (isDeadLetterQueue(name)) return { name, kind: 'dead-letter', sources: [] }
  if (options.steps !== undefined) {
    return { name, kind: 'pipeline', sources: options.steps.map((step) => `${name}.${step}`) }
  }
  if (options.partitions !== undefined) {
    const sources = Array.from({ length: options.partitions }, (_, p) => `${name}.${p}`)
    return { name, kind: 'ordered', sources }
  }
  if ((await queueLength(transport, name)) !== undefined) {
    return { name, kind: 'queue', sources: [name] }
  }
  const partitions: string[] = []
  while (partitions.length < MAX_PARTITIONS) {
    const partition = `${name}.${partitions.length}`
    if ((await queueLength(transport, partition)) === undefined) break
    partitions.push(partition)
  }
  if (partitions.length > 0) return { name, kind: 'ordered', sources: partitions }
  return { name, kind: 'missing', sources: [name] }
}

/** The dead-letter and parked queues a name stands for. */
export function deadLetterQueuesOf(named: NamedQueue): string[] {
  if (named.kind === 'dead-letter') return [named.name]
  return named.sources.flatMap((source) => [`${source}.dlq`, `${source}.parked`])
}

/**
 * Refuses, as a usage error, a name that can be no queue (empty, over 255 bytes, control
 * characters) or whose derived queues (`.dlq`, `.parked`, partitions, steps) could not be.
 */
export function checkNames(names: readonly string[], options: ExpandOptions): void {
  if (options.partitions !== undefined && options.steps !== undefined) {
    throw new UsageError(
      '--partitions and --steps cannot be given together: a name is one or the other',
    )
  }
  for (const name of names) {
    const sources = isDeadLetterQueue(name)
      ? []
      : [
          name,
          ...(options.steps ?? []).map((step) => `${name}.${step}`),
          ...(options.partitions === undefined ? [] : [`${name}.${options.partitions - 1}`]),
        ]
    const derived = isDeadLetterQueue(name)
      ? [name]
      : sources.flatMap((source) => [source, `${source}.dlq`, `${source}.parked`])
    for (const queue of derived) {
      try {
        validateQueueName(queue, '--queues')
      } catch (error) {
        if (!(error instanceof ConfigurationError)) throw error
        throw new UsageError(
          queue === name
            ? `--queues: ${error.message}`
            : `--queues: '${shorten(name)}' cannot have the queue '${shorten(queue)}': ${error.message}`,
        )
      }
    }
  }
}

function isDeadLetterQueue(name: string): boolean {
  return name.endsWith('.dlq') || name.endsWith('.parked')
}

/** A long name by its ends: its start, and the suffix that made it too long. */
function shorten(name: string): string {
  return name.length > 60 ? `${name.slice(0, 28)}…${name.slice(-28)}` : name
}
