import { Option, type Command } from 'commander'
import { createOutboxTableSql, createTableSql, type IdempotencyDialect } from '@acemq/store-kysely'
import type { CommandContext } from '../program.js'

const DIALECTS: readonly IdempotencyDialect[] = ['postgres', 'sqlite', 'mysql']

/** `store sql` and `outbox sql`. */
export function sqlCommands(program: Command, context: CommandContext): void {
  const dialect = (): Option =>
    new Option('--dialect <dialect>', 'the database').choices(DIALECTS).default('postgres')
  program
    .command('store')
    .description('the idempotency store’s table')
    .command('sql')
    .description('the DDL of the idempotency table, to put in a migration (nothing is run)')
    .addOption(dialect())
    .option('--table <name>', 'the table, optionally schema.table', 'acemq_idempotency')
    .action((options: { dialect: IdempotencyDialect; table: string }, command: Command) => {
      const sql = createTableSql({ dialect: options.dialect, table: options.table })
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
    .option('--table <name>', 'the table, optionally schema.table', 'acemq_outbox')
    .action((options: { dialect: IdempotencyDialect; table: string }, command: Command) => {
      const sql = createOutboxTableSql({ dialect: options.dialect, table: options.table })
      context(command).output.result(sql.trimEnd(), {
        dialect: options.dialect,
        table: options.table,
        sql,
      })
    })
}
