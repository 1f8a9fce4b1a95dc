import { Command, CommanderError, Option } from 'commander'
import { ErrorCodes, ReplayStoppedError, errorCodeOf } from '@acemq/core'
import { describeError } from '@acemq/core/spi'
import { consoleCommands } from './commands/console.js'
import { dlqCommands } from './commands/dlq.js'
import { healthCommands } from './commands/health.js'
import { outboxCommands } from './commands/outbox.js'
import { scheduleCommands } from './commands/schedule.js'
import { sqlCommands } from './commands/sql.js'
import { topologyCommands } from './commands/topology.js'
import { brokerAbout, type BrokerAbout } from './broker.js'
import { EXIT_CODES, UsageError } from './exit-codes.js'
import { createOutput, type Output } from './output.js'

/** The broker a command connects to unless `--url` or `AMQP_URL` says otherwise. */
export const DEFAULT_URL = 'amqp://localhost:5672'

/** What every command reads from the global options. */
export type CommandContext = (command: Command) => {
  readonly output: Output
  readonly url: string
  /** The broker (its URL without the password) and virtual host every answer names. */
  readonly about: BrokerAbout
}

const VERSION = '0.1.0'

/**
 * The `acemq` program: commander with every command registered. Usage errors are thrown as
 * `CommanderError`s instead of exiting, so {@link main} decides the exit code.
 *
 * @example
 * ```ts
 * await createProgram().parseAsync(['node', 'acemq', 'store', 'sql', '--dialect', 'sqlite'])
 * ```
 */
export function createProgram(): Command {
  const program = new Command('acemq')
    .description(
      'Operate AceMQ services on RabbitMQ: dead-letter queues, topology, health, store DDL.',
    )
    .version(VERSION)
    .addOption(
      new Option('--url <url>', 'the broker; the password is never printed')
        .env('AMQP_URL')
        .default(DEFAULT_URL),
    )
    .option('--json', 'print results as JSON, for scripts', false)
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({
      writeErr: (text) => process.stderr.write(text),
      writeOut: (text) => process.stdout.write(text),
    })
    .addHelpText(
      'after',
      `
Exit codes: 0 done; 1 failed (broker out of reach, a publish failed, health DOWN, nothing named exists); 2 usage error.
With --json, standard output holds one JSON document: the result, or {"error": {...}} when it failed.`,
    )
  const context: CommandContext = (command) => {
    const globals = command.optsWithGlobals<{ url: string; json: boolean }>()
    return {
      url: globals.url,
      output: createOutput({
        json: globals.json,
        url: globals.url,
        otherUrls: otherUrlsIn(process.argv),
      }),
      about: brokerAbout(globals.url),
    }
  }
  dlqCommands(program, context)
  topologyCommands(program, context)
  healthCommands(program, context)
  sqlCommands(program, context)
  outboxCommands(program, context)
  scheduleCommands(program, context)
  consoleCommands(program, context)
  // Every command exits like the program: usage errors are thrown, not printed and exited.
  for (const command of allCommands(program)) {
    command.exitOverride()
    command.showHelpAfterError('(run with --help for usage)')
  }
  return program
}

function allCommands(command: Command): Command[] {
  return command.commands.flatMap((child) => [child, ...allCommands(child)])
}

/**
 * Runs `acemq` with `argv` (as `process.argv`) and resolves with the exit code: 0 done, 1
 * failed, 2 usage error. Errors are printed to standard error without the URL's password; with
 * `--json` also to standard output as `{"error": {"message", "code", "exitCode", …}}`.
 *
 * @example
 * ```ts
 * process.exitCode = await main(process.argv)
 * ```
 */
export async function main(argv: readonly string[]): Promise<number> {
  const program = createProgram()
  const url = urlIn(argv)
  const json = jsonIn(argv)
  const output = createOutput({ json, url, otherUrls: otherUrlsIn(argv) })
  try {
    await program.parseAsync([...argv])
    return typeof process.exitCode === 'number' ? process.exitCode : EXIT_CODES.ok
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.code === 'commander.helpDisplayed' || error.code === 'commander.version') {
        return EXIT_CODES.ok
      }
      if (error.code === 'commander.help') return EXIT_CODES.ok
      // Commander has printed the message already.
      if (json) output.error(error.message.replace(/^error: /, ''), usageCode, EXIT_CODES.usage)
      return EXIT_CODES.usage
    }
    const code = errorCodeOf(error)
    if (error instanceof UsageError || code === ErrorCodes.CONFIGURATION) {
      output.note(`error: ${describeError(error)}`)
      if (json) output.error(describeError(error), code ?? usageCode, EXIT_CODES.usage)
      return EXIT_CODES.usage
    }
    output.note(`error: ${describeError(error)}${code === undefined ? '' : ` (${code})`}`)
    if (json) output.error(describeError(error), code, EXIT_CODES.failed, stopDetails(error))
    return EXIT_CODES.failed
  }
}

/** The code a usage error carries in a JSON error object. */
const usageCode = 'USAGE'

/** A replay that stopped: how many it had moved, and which messages it could not write. */
function stopDetails(error: unknown): Record<string, unknown> {
  if (!(error instanceof ReplayStoppedError)) return {}
  return { moved: error.moved, notWritten: error.notWritten }
}

/** Whether `--json` was given (before a `--`), read before parsing so a usage error sees it. */
function jsonIn(argv: readonly string[]): boolean {
  for (const arg of argv.slice(2)) {
    if (arg === '--') return false
    if (arg === '--json') return true
  }
  return false
}

/** URLs besides the broker's that may carry a password: `--management-url`. */
function otherUrlsIn(argv: readonly string[]): string[] {
  const urls: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? ''
    if (arg === '--management-url' && argv[i + 1] !== undefined) urls.push(argv[i + 1] as string)
    if (arg.startsWith('--management-url=')) urls.push(arg.slice('--management-url='.length))
  }
  return urls
}

/** The URL the run will use, read before parsing so an early error can hide its password too. */
function urlIn(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? ''
    if (arg === '--url') return argv[i + 1]
    if (arg.startsWith('--url=')) return arg.slice('--url='.length)
  }
  return process.env['AMQP_URL']
}
