import { Option, type Command } from 'commander'
import {
  DEFAULT_IDEMPOTENCY_TABLE,
  DEFAULT_OUTBOX_TABLE,
  idempotencyTableStatements,
  outboxTableStatements,
  SQL_DIALECTS,
  sqlScript,
  type SqlDialect,
} from '@acemq/core/spi'
import type { CommandContext } from '../program.js'

/** `store sql` and `outbox sql`. */
export function sqlCommands(program: Command, context: CommandContext): void {
  const dialect = (): Option =>
    new Option('--dialect <dialect>', 'the database').choices(SQL_DIALECTS).default('postgres')
  program
    .command('store')
    .description('the idempotency store’s table')
    .command('sql')
    .description('the DDL of the idempotency table, to put in a migration (nothing is run)')
    .addOption(dialect())
    .option('--table <name>', 'the table, optionally schema.table', DEFAULT_IDEMPOTENCY_TABLE)
    .action((options: { dialect: SqlDialect; table: string }, command: Command) => {
      // The DDL the stores write, from core's one place for it (docs/design.md §1).
      const sql = sqlScript(idempotencyTableStatements(options.table, options.dialect))
      context(command).output.result(sql.trimEnd(), {
        dialect: options.dialect,
        table: options.table,
        sql,
      })
    })
  program
    .command('outbox')
    .description('the transactional outbox’s table')
    .command('sql')
    .description('the DDL of the outbox table, to put in a migration (nothing is run)')
    .addOption(dialect())
    .option('--table <name>', 'the table, optionally schema.table', DEFAULT_OUTBOX_TABLE)
    .action((options: { dialect: SqlDialect; table: string }, command: Command) => {
      const sql = sqlScript(outboxTableStatements(options.table, options.dialect))
      context(command).output.result(sql.trimEnd(), {
        dialect: options.dialect,
        table: options.table,
        sql,
      })
    })
}
