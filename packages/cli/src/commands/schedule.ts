import type { Command } from 'commander'
import { SCHEDULE_DUE_QUEUE, SCHEDULE_RUNGS, formatDuration } from '@acemq/core/spi'
import { openConnection, queueLength } from '../connection.js'
import { table } from '../format.js'
import type { CommandContext } from '../program.js'

/** `schedule list`: the depth of the scheduler's ladder (docs/design.md §25). */
export function scheduleCommands(program: Command, context: CommandContext): void {
  const schedule = program
    .command('schedule')
    .description('the delayed messages waiting on the scheduler’s ladder (acemq.schedule.*)')

  schedule
    .command('list')
    .description(
      'how many messages wait on each rung of the ladder and in the control queue, longest rung first',
    )
    .action(async (_options: unknown, command: Command) => {
      const { output, url } = context(command)
      const mq = await openConnection(url)
      try {
        const rows: { queue: string; ttl: string; messages: number | null }[] = []
        for (const rung of SCHEDULE_RUNGS) {
          const count = await queueLength(mq.transport, rung.queue)
          rows.push({ queue: rung.queue, ttl: formatDuration(rung.ttlMs), messages: count ?? null })
        }
        const due = await queueLength(mq.transport, SCHEDULE_DUE_QUEUE)
        rows.push({ queue: SCHEDULE_DUE_QUEUE, ttl: 'due', messages: due ?? null })
        const declared = rows.filter((row) => row.messages !== null)
        const waiting = declared.reduce((sum, row) => sum + (row.messages ?? 0), 0)
        const text =
          declared.length === 0
            ? 'the schedule ladder is not declared on this broker (nothing was ever scheduled)'
            : [
                table(
                  ['QUEUE', 'WAIT', 'MESSAGES'],
                  rows.map((row) => [
                    row.queue,
                    row.ttl,
                    row.messages === null ? 'not declared' : String(row.messages),
                  ]),
                ),
                `${waiting} message(s) scheduled and not yet delivered`,
              ].join('\n')
        output.result(text, { queues: rows, waiting })
      } finally {
        await mq.close({ drainTimeout: 0 })
      }
    })
}
