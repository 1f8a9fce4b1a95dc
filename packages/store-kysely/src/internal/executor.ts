import type { QueryExecutor, QueryExecutorProvider } from 'kysely'
import type { KyselyDatabase } from '../kysely-database.js'

// The public types describe a Kysely structurally (see KyselyDatabase); at run time it is a
// Kysely, of whichever build, and kysely's own types describe it exactly.

/** The executor of `db`, as kysely types it. */
export function queryExecutor(db: KyselyDatabase): QueryExecutor {
  return db.getExecutor() as unknown as QueryExecutor
}

/** `db` as what `sql`...`.execute()` and `.compile()` take. */
export function executorProvider(db: KyselyDatabase): QueryExecutorProvider {
  return db as unknown as QueryExecutorProvider
}
