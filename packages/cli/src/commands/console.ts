import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import path from 'node:path'
import type { Command } from 'commander'
import { UsageError } from '../exit-codes.js'
import type { CommandContext } from '../program.js'

/**
 * `console`: runs `acemq-console` from `@acemq/console`, installed beside the cli. The cli never
 * imports a store, so it hosts no console of its own: it finds the package's binary and runs it
 * with the options given, the broker's URL passed in the environment (never in the process
 * list).
 */
export function consoleCommands(program: Command, context: CommandContext): void {
  program
    .command('console')
    .description(
      'serves the dead-letter console (acemq-console from @acemq/console, installed beside the cli); its options follow, e.g. --archive sqlite:dead-letters.db --queues orders.placed.dlq',
    )
    .helpOption(false)
    .allowUnknownOption(true)
    .allowExcessArguments(true)
    .action(async (_options: unknown, command: Command) => {
      const { url } = context(command)
      let bin: string
      try {
        const manifest = createRequire(import.meta.url).resolve('@acemq/console/package.json')
        bin = path.join(path.dirname(manifest), 'dist', 'bin.js')
      } catch {
        throw new UsageError(
          'acemq console needs @acemq/console: npm install @acemq/console (an optional peer dependency of @acemq/cli)',
        )
      }
      const child = spawn(process.execPath, [bin, ...command.args], {
        stdio: 'inherit',
        env: { ...process.env, AMQP_URL: url },
      })
      process.exitCode = await new Promise<number>((resolve, reject) => {
        child.once('error', reject)
        child.once('close', (code) => resolve(code ?? 1))
      })
    })
}
