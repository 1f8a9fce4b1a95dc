import type { CompiledQuery, QueryExecutor, QueryResult, RawBuilder } from 'kysely'

/** Runs a statement compiled once with this run's values bound to its named slots. */
export type Prepared<Slot extends string, Row = unknown> = (
  values: Readonly<Record<Slot, unknown>>,
) => Promise<QueryResult<Row>>

/**
 * Compiles `build` once and returns a runner that only binds values: building and compiling
 * a Kysely query costs tens of µs, which a store pays on every message otherwise. `build`
 * receives a marker per slot to interpolate where the value goes; a slot may appear more than
 * once. Only values may be slots; identifiers and keywords are fixed at compile time.
 */
export function prepare<Slot extends string, Row = unknown>(
  executor: QueryExecutor,
  slots: readonly Slot[],
  build: (slot: Readonly<Record<Slot, unknown>>) => RawBuilder<unknown>,
): Prepared<Slot, Row> {
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
  return (values) => {
    const query: CompiledQuery<Row> = {
      query: compiled.query,
      queryId: compiled.queryId,
      sql: compiled.sql,
      parameters: order.map((name) => values[name]),
    }
    // What `executor.executeQuery` does, without its plugin pass (the store's executor has no
    // plugins) and two of its async frames: under an AsyncLocalStorage, Node 20 runs promise
    // hooks for each promise a statement makes.
    return executor.provideConnection((connection) => connection.executeQuery(query))
  }
}
