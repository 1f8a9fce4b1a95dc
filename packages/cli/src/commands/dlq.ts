import { SingleBar } from 'cli-progress'
import type { Command } from 'commander'
import type { ReplayMessage } from '@acemq/core'
import { openConnection, queueLength } from '../connection.js'
import { UsageError } from '../exit-codes.js'
import { humanDuration, table } from '../format.js'
import type { CommandContext } from '../program.js'

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
      'the .dlq and .parked queues of the given queues, with their message counts (AMQP cannot list queues: name them with --queues)',
    )
    .requiredOption(
      '--queues <names>',
      'comma-separated queue names: a source queue stands for its .dlq and .parked queues',
      (value: string, previous: string[] = []) => [
        ...previous,
        ...value
          .split(',')
          .map((name) => name.trim())
          .filter((name) => name !== ''),
      ],
    )
    .action(async (options: { queues: string[] }, command: Command) => {
      const { output, url } = context(command)
      const names = options.queues.flatMap((name) =>
        name.endsWith('.dlq') || name.endsWith('.parked')
          ? [name]
          : [`${name}.dlq`, `${name}.parked`],
      )
      if (names.length === 0) throw new UsageError('--queues names no queue')
      const mq = await openConnection(url)
      try {
        const found: { queue: string; messages: number }[] = []
        const missing: string[] = []
        for (const queue of [...new Set(names)]) {
          const count = await queueLength(mq.transport, queue)
          if (count === undefined) missing.push(queue)
          else found.push({ queue, messages: count })
        }
        const lines = [
          found.length === 0
            ? 'no dead-letter or parked queue found'
            : table(
                ['QUEUE', 'MESSAGES'],
                found.map((q) => [q.queue, String(q.messages)]),
              ),
        ]
        if (missing.length > 0) lines.push(`not declared: ${missing.join(', ')}`)
        output.result(lines.join('\n'), { queues: found, missing })
      } finally {
        await mq.close({ drainTimeout: 0 })
      }
    })

  dlq
    .command('peek')
    .description(
      'the messages at the head of a queue — why they were set aside, their attempts and ages — leaving them where they are',
    )
    .argument('<queue>', 'the queue to look at, e.g. orders.placed.dlq')
    .option('-n, --count <n>', 'how many messages to show', positiveInteger('--count'), 10)
    .action(async (queue: string, options: { count: number }, command: Command) => {
      const { output, url } = context(command)
      const mq = await openConnection(url)
      try {
        const replay = mq.replay(queue)
        const waiting = await replay.pending()
        const messages = await replay.peek(options.count)
        const now = Date.now()
        const views = messages.map((message) => peekView(message, now))
        const human =
          views.length === 0
            ? `${queue}: empty`
            : [
                `${queue}: ${waiting} message${waiting === 1 ? '' : 's'}; the first ${views.length}:`,
                ...views.map((v, i) =>
                  [
                    `${i + 1}. ${v.id}  attempt ${v.attempt}  age ${v.ageMs === undefined ? 'unknown' : humanDuration(v.ageMs)}  type ${v.type || '-'}${v.replayCount > 0 ? `  replayed ${v.replayCount}x` : ''}`,
                    `   reason: ${v.reason ?? '(none)'}`,
                  ].join('\n'),
                ),
              ].join('\n')
        output.result(human, { queue, pending: waiting, messages: views })
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
        const { output, url } = context(command)
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
          if (replay.target === undefined) {
            throw new UsageError(
              `${queue} does not end in .dlq or .parked: say where its messages go with --into`,
            )
          }
          const pending = await replay.pending()
          if (showProgress) {
            bar = new SingleBar({
              format: `replaying ${queue} -> ${replay.target} [{bar}] {value}/{total} looked at, {moved} moved`,
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
            `moved ${moved} message${moved === 1 ? '' : 's'} from ${queue} to ${replay.target}`,
            { source: queue, target: replay.target, moved, waitingBefore: pending },
          )
        } finally {
          await mq.close({ drainTimeout: 0 })
        }
      },
    )
}

interface PeekView {
  readonly id: string
  readonly type: string
  readonly attempt: number
  readonly firstSeen: number | undefined
  readonly ageMs: number | undefined
  readonly reason: string | undefined
  readonly replayCount: number
  readonly contentType: string | undefined
  readonly headers: Readonly<Record<string, unknown>>
  readonly body: string
}

function peekView(message: ReplayMessage, now: number): PeekView {
  const { envelope } = message
  return {
    id: envelope.id,
    type: envelope.type,
    attempt: envelope.attempt,
    firstSeen: envelope.firstSeen,
    ageMs: envelope.firstSeen === undefined ? undefined : Math.max(0, now - envelope.firstSeen),
    reason: envelope.error,
    replayCount: message.replayCount,
    contentType: message.contentType,
    headers: message.headers,
    body: Buffer.from(message.body).toString('utf8'),
  }
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
