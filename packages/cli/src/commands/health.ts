import type { Command } from 'commander'
import { type HealthResult } from '@acemq/core'
import { describeError } from '@acemq/core/spi'
import { describeBroker } from '../broker.js'
import { openConnection } from '../connection.js'
import { EXIT_CODES } from '../exit-codes.js'
import type { CommandContext } from '../program.js'

/** `health`. */
export function healthCommands(program: Command, context: CommandContext): void {
  program
    .command('health')
    .description(
      'connects and prints the connection’s health report; exits 1 when it is DOWN (the broker cannot be reached)',
    )
    .action(async (_options: unknown, command: Command) => {
      const { output, url, about } = context(command)
      let result: HealthResult
      try {
        const mq = await openConnection(url)
        try {
          result = await mq.health()
        } finally {
          await mq.close({ drainTimeout: 0 })
        }
      } catch (error) {
        result = {
          status: 'DOWN',
          inFlight: 0,
          reports: [
            { name: 'connection', status: 'DOWN', details: { error: describeError(error) } },
          ],
        }
      }
      const human = [
        result.status,
        describeBroker(about),
        ...result.reports.map(
          (report) =>
            `${report.name}: ${report.status}${Object.entries(report.details)
              .map(([key, value]) => `\n  ${key}: ${value}`)
              .join('')}`,
        ),
      ].join('\n')
      output.result(human, { ...about, ...result })
      if (result.status === 'DOWN') process.exitCode = EXIT_CODES.failed
    })
}
