import { SingleBar } from 'cli-progress'
import type { GiveBack, Transport } from '@acemq/core/spi'
import type { Command } from 'commander'
import { describeBroker } from '../broker.js'
import { openConnection, queueLength } from '../connection.js'
import { EXIT_CODES, UsageError } from '../exit-codes.js'
import { table } from '../format.js'
import type { CommandContext } from '../program.js'
import { listDiscovered } from './dlq-discovered.js'
import { checkNames, deadLetterQueuesOf, expandName, type NamedQueue } from './dlq-list.js'
import { partitionOf, peekLines, peekView } from './peek-view.js'

/** `dlq list`, `dlq peek`, `dlq replay`. */
export function dlqCommands(program: Command, context: CommandContext): void {
  const dlq = program
    .command('dlq')
    .description(
      'what waits in the dead-letter (.dlq) and parked (.parked) queues, and sending it back',
    )

  dlq
    .command('list')
    .description(
      'the .dlq and .parked queues of a virtual host, found through the management API with their depth, consumers and oldest message; or those of the queues, ordered queues and pipelines named with --queues, with their message counts',
    )
    .option(
      '--management-url <url>',
      'the management API (default: the --url host on port 15672, 15671 for amqps); its login is the --url one unless it has its own; never printed',
    )
    .option(
      '--queues <names>',
      'comma-separated names: a queue stands for its .dlq and .parked queues, an ordered queue for its partitions’ (found on the broker), a pipeline for its steps’ (with --steps)',
      (value: string, previous: string[] = []) => [
        ...previous,
        ...value
          .split(',')
          .map((name) => name.trim())
          .filter((name) => name !== ''),
      ],
    )
    .option(
      '--partitions <n>',
      'the names are ordered queues of n partitions',
      positiveInteger('--partitions'),
    )
    .option(
      '--steps <steps>',
      'the names are pipelines with these comma-separated steps',
      (value) =>
        value
          .split(',')
          .map((step) => step.trim())
          .filter((step) => step !== ''),
    )
    .action(
      async (
        options: {
          queues?: string[]
          partitions?: number
          steps?: string[]
          managementUrl?: string
        },
        command: Command,
      ) => {
        const { output, url, about } = context(command)
        if (options.queues === undefined) {
          if (options.partitions !== undefined || options.steps !== undefined) {
            throw new UsageError('--partitions and --steps say what the names of --queues are')
          }
          await listDiscovered({ url, managementUrl: options.managementUrl }, output, about)
          return
        }
        if (options.queues.length === 0) throw new UsageError('--queues names no queue')
        if (options.steps !== undefined && options.steps.length === 0) {
          throw new UsageError('--steps names no step')
        }
        const expand = {
          ...(options.partitions === undefined ? {} : { partitions: options.partitions }),
          ...(options.steps === undefined ? {} : { steps: options.steps }),
        }
        checkNames(options.queues, expand)
        const mq = await openConnection(url)
        try {
          const named: NamedQueue[] = []
          for (const name of [...new Set(options.queues)]) {
            named.push(await expandName(mq.transport, name, expand))
          }
          const { found, missing } = await countQueues(
            mq.transport,
            named.flatMap((n) => deadLetterQueuesOf(n)),
          )
          const lines = [describeBroker(about), ...named.flatMap((n) => describeNamed(n))]
          lines.push(
            found.length === 0
              ? 'no dead-letter or parked queue found'
              : table(
                  ['QUEUE', 'MESSAGES'],
                  found.map((q) => [q.queue, String(q.messages)]),
                ),
          )
          if (missing.length > 0) lines.push(`not declared: ${missing.join(', ')}`)
          output.result(lines.join('\n'), { ...about, named, queues: found, missing })
          // Nothing named exists here: likely the wrong broker or virtual host, never "all empty".
          if (found.length === 0) process.exitCode = EXIT_CODES.failed
        } finally {
          await mq.close({ drainTimeout: 0 })
        }
      },
    )

  dlq
    .command('peek')
    .description(
      'the messages at the head of a queue — why they were set aside, their attempts and ages, a pipeline’s step and route, an ordered queue’s partition and key — leaving them where they are, in their order',
    )
    .argument('<queue>', 'the queue to look at, e.g. orders.placed.dlq')
    .option('-n, --count <n>', 'how many messages to show', positiveInteger('--count'), 10)
    .action(async (queue: string, options: { count: number }, command: Command) => {
      const { output, url, about } = context(command)
      const mq = await openConnection(url)
      try {
        const replay = mq.replay(queue)
        const waiting = await replay.pending()
        let gaveBack: GiveBack = { returned: 0, cycled: false }
        const messages = await replay.peek(options.count, {
          onReturned: (r) => (gaveBack = r),
        })
        const now = Date.now()
        const views = messages.map((message) => peekView(message, queue, now))
        const lines = [describeBroker(about)]
        if (views.length === 0) lines.push(`${queue}: empty`)
        else {
          lines.push(
            `${queue}: ${waiting} message${waiting === 1 ? '' : 's'}; the first ${views.length}:`,
            ...views.map((view, i) => peekLines(view, i)),
          )
        }
        const cost = peekCost(gaveBack)
        if (cost !== undefined) lines.push(cost)
        const ordered = views.find((view) => view.partition !== undefined)
        const partition = partitionOf(queue)
        const warning =
          ordered !== undefined && partition !== undefined
            ? orderedReplayWarning(partition.ordered, partition.partition)
            : undefined
        if (warning !== undefined) lines.push(`note: ${warning}`)
        output.result(lines.join('\n'), {
          ...about,
          queue,
          pending: waiting,
          messages: views,
          returned: gaveBack.returned,
          wentRound: gaveBack.cycled,
          ...(warning === undefined ? {} : { warning }),
        })
      } finally {
        await mq.close({ drainTimeout: 0 })
      }
    })

  dlq
    .command('replay')
    .description(
      'sends the messages of a .dlq or .parked queue back: each is republished (confirmed) before it is removed; attempts restart at 1',
    )
    .argument('<queue>', 'the queue to replay, e.g. orders.placed.dlq')
    .option('--into <queue>', 'where the messages go (default: the name without .dlq or .parked)')
    .option('--max <n>', 'move at most this many', positiveInteger('--max'))
    .option('--keep-attempts', 'keep each message’s attempt instead of restarting it at 1', false)
    .option('--progress', 'show progress even when standard error is not a terminal', false)
    .option('--no-progress', 'never show progress')
    .action(
      async (
        queue: string,
        options: { into?: string; max?: number; keepAttempts: boolean; progress: boolean },
        command: Command,
      ) => {
        const { output, url, about } = context(command)
        const showProgress =
          command.getOptionValueSource('progress') === 'cli'
            ? options.progress
            : process.stderr.isTTY === true && !output.json
        const mq = await openConnection(url)
        let bar: SingleBar | undefined
        try {
          let replay = mq.replay(queue)
          if (options.into !== undefined) replay = replay.into(options.into)
          if (options.keepAttempts) replay = replay.keepingAttempts()
          const target = replay.target
          if (target === undefined) {
            throw new UsageError(
              `${queue} does not end in .dlq or .parked: say where its messages go with --into`,
            )
          }
          // With --json the result names the broker; standard error stays for warnings.
          if (!output.json)
            output.note(`${describeBroker(about)}: replaying ${queue} into ${target}`)
          const warning = await intoPartitionWarning(mq.transport, target)
          if (warning !== undefined) output.note(`warning: ${warning}`)
          const pending = await replay.pending()
          if (showProgress) {
            bar = new SingleBar({
              format: `replaying ${queue} -> ${target} [{bar}] {value}/{total} looked at, {moved} moved`,
              stream: process.stderr,
              noTTYOutput: true,
              notTTYSchedule: 250,
              hideCursor: true,
              etaBuffer: 100,
            })
            bar.start(Math.min(pending, options.max ?? pending), 0, { moved: 0 })
          }
          let moved = 0
          try {
            moved = await replay.replay(options.max ?? Number.POSITIVE_INFINITY, undefined, {
              onProgress: (progress) => {
                bar?.update(progress.scanned, { moved: progress.moved })
              },
            })
          } finally {
            bar?.stop()
          }
          output.result(
            `moved ${moved} message${moved === 1 ? '' : 's'} from ${queue} to ${target}`,
            {
              ...about,
              source: queue,
              target,
              moved,
              waitingBefore: pending,
              ...(warning === undefined ? {} : { warning }),
            },
          )
        } finally {
          await mq.close({ drainTimeout: 0 })
        }
      },
    )
}

async function countQueues(
  transport: Transport,
  queues: readonly string[],
): Promise<{ found: { queue: string; messages: number }[]; missing: string[] }> {
  const found: { queue: string; messages: number }[] = []
  const missing: string[] = []
  for (const queue of [...new Set(queues)]) {
    const count = await queueLength(transport, queue)
    if (count === undefined) missing.push(queue)
    else found.push({ queue, messages: count })
  }
  return { found, missing }
}

function describeNamed(named: NamedQueue): string[] {
  const first = named.sources[0]
  const last = named.sources[named.sources.length - 1]
  switch (named.kind) {
    case 'ordered':
      return [
        `${named.name}: ordered queue, ${named.sources.length} partition(s) (${first}${named.sources.length > 1 ? ` … ${last}` : ''})`,
      ]
    case 'pipeline':
      return [`${named.name}: pipeline, steps ${named.sources.join(', ')}`]
    case 'missing':
      return [
        `${named.name}: no such queue, and no ordered queue's partition ${named.name}.0 (a pipeline? name its steps with --steps)`,
      ]
    default:
      return []
  }
}

/** What a peek cost in returns, when it gave anything back. */
function peekCost(gaveBack: GiveBack): string | undefined {
  if (gaveBack.returned === 0) return undefined
  const round = gaveBack.cycled
    ? ' (the queue puts a message given back behind the others — a RabbitMQ 3.x quorum queue — so all of it went round to keep its order)'
    : ''
  return `gave back ${gaveBack.returned} message(s)${round}; on RabbitMQ 4.0 to 4.2 each return counts toward a quorum queue's delivery limit (20 by default)`
}

function orderedReplayWarning(ordered: string, partition: number): string {
  return `${ordered}.${partition} is partition ${partition} of the ordered queue ${ordered}: a replayed message goes to the back of the partition, after every entry sent since it was set aside`
}

/** A warning when `target` is a partition of an ordered queue (its `{name}.0` exists). */
async function intoPartitionWarning(
  transport: Transport,
  target: string,
): Promise<string | undefined> {
  const partition = partitionOf(target)
  if (partition === undefined || `${partition.ordered}.${partition.partition}` !== target) {
    return undefined
  }
  if ((await queueLength(transport, `${partition.ordered}.0`)) === undefined) return undefined
  return orderedReplayWarning(partition.ordered, partition.partition)
}

/** A commander parser for a whole number of at least 1. */
export function positiveInteger(option: string): (value: string) => number {
  return (value) => {
    const n = Number(value)
    if (!Number.isSafeInteger(n) || n < 1) {
      throw new UsageError(
        `${option} must be a whole number of at least 1; got ${JSON.stringify(value)}`,
      )
    }
    return n
  }
}
