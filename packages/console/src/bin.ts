#!/usr/bin/env node
import { errorCodeOf, ErrorCodes } from '@acemq/core'
import { describeError, redactCredentials } from '@acemq/core/spi'
import { UsageHelp, runConsoleCommand } from './console-command.js'

try {
  const running = await runConsoleCommand(process.argv.slice(2))
  process.stdout.write(`acemq-console: serving ${running.server.url}\n`)
  const stop = (): void => {
    void running.stop().then(() => process.exit(0))
  }
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
} catch (error) {
  if (error instanceof UsageHelp) {
    process.stdout.write(`${error.message}\n`)
    process.exitCode = 0
  } else {
    process.stderr.write(`acemq-console: ${redactCredentials(describeError(error))}\n`)
    process.exitCode =
      errorCodeOf(error) === ErrorCodes.CONFIGURATION ||
      (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') === true
        ? 2
        : 1
  }
}
