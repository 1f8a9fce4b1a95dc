import type { CompiledQuery, QueryExecutor, QueryResult, RawBuilder } from 'kysely'

/** Builds a statement compiled once, with this run's values bound to its named slots. */
export type Compiled<Slot extends string> = (
  values: Readonly<Record<Slot, unknown>>,
) => CompiledQuery

/** Runs a statement compiled once with this run's values bound to its named slots. */
export type Prepared<Slot extends string, Row = unknown> = (
  values: Readonly<Record<Slot, unknown>>,
) => Promise<QueryResult<Row>>

/**
 * Compiles `build` once and returns a function that only binds values: building and compiling
 * a Kysely query costs tens of µs, which a store pays on every message otherwise. `build`
 * receives a marker per slot to interpolate where the value goes; a slot may appear more than
 * once. Only values may be slots; identifiers and keywords are fixed at compile time. The
 * bound statement runs on any executor (see {@link run}): the store's own, or the caller's
 * transaction.
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
      throw new TypeError(`a prepared statement has a fixed parameter: ${compiled.sql}`)
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
 * that transaction). It is what `executor.executeQuery` does, without its plugin pass (which
 * would rewrite the store's columns) and two of its async frames: under an AsyncLocalStorage,
 * Node 20 runs promise hooks for each promise a statement makes.
 */
export function run<Row = Record<string, unknown>>(
  executor: QueryExecutor,
  query: CompiledQuery,
): Promise<QueryResult<Row>> {
  return executor.provideConnection((connection) => connection.executeQuery<Row>(query))
}

/**
 * {@link compile} and {@link run} on one executor: a runner that binds values and runs the
 * statement compiled once on the store's own executor.
 */
export function prepare<Slot extends string, Row = unknown>(
  executor: QueryExecutor,
  slots: readonly Slot[],
  build: (slot: Readonly<Record<Slot, unknown>>) => RawBuilder<unknown>,
): Prepared<Slot, Row> {
  const bind = compile(executor, slots, build)
  return (values) => run<Row>(executor, bind(values))
}
