export {
  DEFAULT_BUSY_TIMEOUT,
  DEFAULT_IDEMPOTENCY_TABLE,
  DEFAULT_PURGE_BATCH_SIZE,
  DEFAULT_PURGE_EVERY,
} from './constants.js'
export {
  SqliteIdempotencyStore,
  type SqliteIdempotencyStoreOptions,
} from './sqlite-idempotency-store.js'
export { SqliteOutboxStore, type SqliteOutboxStoreOptions } from './sqlite-outbox-store.js'
export {
  outboxMigration,
  type KyselyMigrationDatabase,
  type SqliteOutboxMigration,
} from './outbox-migration.js'
export { SqliteArchiveStore, type SqliteArchiveStoreOptions } from './sqlite-archive-store.js'
