import type { CompiledQuery, QueryExecutor, QueryResult, RawBuilder } from 'kysely'

/** Builds a statement compiled once, with this run's values bound to its named slots. */
export type Compiled<Slot extends string> = (
  values: Readonly<Record<Slot, unknown>>,
) => CompiledQuery

/**
 * Compiles `build` once (see `prepare`) and returns a function that binds values, so the
 * statement can run on any executor: the store's own, or the caller's transaction.
 */
export function compile<Slot extends string>(
  executor: QueryExecutor,
  slots: readonly Slot[],
  build: (slot: Readonly<Record<Slot, unknown>>) => RawBuilder<unknown>,
): Compiled<Slot> {
  const markers = new Map<unknown, Slot>()
  const slot = {} as Record<Slot, unknown>
  for (const name of slots) {
    const marker = Object.freeze({ slot: name })
    markers.set(marker, name)
    slot[name] = marker
  }
  const compiled = build(slot).compile({ getExecutor: () => executor })
  const order = compiled.parameters.map((parameter) => {
    const name = markers.get(parameter)
    if (name === undefined) {
      throw new TypeError(`a compiled statement has a fixed parameter: ${compiled.sql}`)
    }
    return name
  })
  return (values) => ({
    query: compiled.query,
    queryId: compiled.queryId,
    sql: compiled.sql,
    parameters: order.map((name) => values[name]),
  })
}

/**
 * Runs a compiled statement on `executor`'s connection (a transaction's executor runs it in
 * that transaction) without the executor's plugins, which would rewrite the store's columns.
 */
export function run<Row = Record<string, unknown>>(
  executor: QueryExecutor,
  query: CompiledQuery,
): Promise<QueryResult<Row>> {
  return executor.provideConnection((connection) => connection.executeQuery<Row>(query))
}
