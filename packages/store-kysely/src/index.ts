export {
  DEFAULT_IDEMPOTENCY_TABLE,
  DEFAULT_PURGE_BATCH_SIZE,
  DEFAULT_PURGE_EVERY,
} from './constants.js'
export { createTableSql, type CreateTableSqlOptions } from './create-table-sql.js'
export { type IdempotencyDialect } from './idempotency-dialect.js'
export { idempotencyMigration, type IdempotencyMigration } from './idempotency-migration.js'
export {
  KyselyIdempotencyStore,
  type KyselyIdempotencyStoreOptions,
} from './kysely-idempotency-store.js'
export type { KyselyDatabase, KyselyExecutor } from './kysely-database.js'
export { createOutboxTableSql, type OutboxTableSqlOptions } from './outbox-table-sql.js'
export { outboxMigration } from './outbox-migration.js'
export { KyselyOutboxStore, type KyselyOutboxStoreOptions } from './kysely-outbox-store.js'
export {
  DEFAULT_CLAIM_CHECK_TABLE,
  KyselyClaimCheckStore,
  createClaimCheckTableSql,
  type KyselyClaimCheckStoreOptions,
} from './kysely-claim-check-store.js'
export { KyselyArchiveStore, type KyselyArchiveStoreOptions } from './kysely-archive-store.js'
