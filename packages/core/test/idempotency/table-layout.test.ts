import { describe, expect, it } from 'vitest'
import { foreignIdempotencyTable, idempotencyTableLayout, type TableColumn } from '../../src/spi.js'

const columns = (...spec: string[]): TableColumn[] =>
  spec.map((entry) => {
    const [name = '', type = 'text'] = entry.split(':')
    return { name, type }
  })

const OWN = columns('id', 'owner', 'claimed_at:bigint', 'confirmed:boolean', 'confirmed_at:bigint')
const JAVA = columns(
  'message_id:character varying',
  'state:character varying',
  'claimed_by:character varying',
  'recorded_at:timestamp with time zone',
  'expires_at:timestamp with time zone',
)

// Every AceMQ library defaults to a table named acemq_idempotency with its own columns
// (docs/design.md §7): a store names the one it found.
describe('idempotencyTableLayout', () => {
  it("knows this library's columns, whatever their case or order or extra columns", () => {
    expect(idempotencyTableLayout(OWN)).toBe('typescript')
    expect(
      idempotencyTableLayout(
        [...columns('tenant'), ...OWN.map((c) => ({ ...c, name: c.name.toUpperCase() }))].reverse(),
      ),
    ).toBe('typescript')
  })

  it('tells Java / Ruby (timestamps) from Python (epoch-ms integers) by the type of recorded_at', () => {
    expect(idempotencyTableLayout(JAVA)).toBe('java-ruby')
    expect(
      idempotencyTableLayout(
        columns(
          'message_id',
          'state',
          'claimed_by',
          'recorded_at:datetime(3)',
          'expires_at:datetime(3)',
        ),
      ),
    ).toBe('java-ruby')
    expect(
      idempotencyTableLayout(
        columns('message_id', 'state', 'claimed_by', 'recorded_at:bigint', 'expires_at:bigint'),
      ),
    ).toBe('python')
    expect(
      idempotencyTableLayout(
        columns('message_id', 'state', 'claimed_by', 'recorded_at:INTEGER', 'expires_at:INTEGER'),
      ),
    ).toBe('python')
  })

  it('knows the .NET and Go layouts', () => {
    expect(
      idempotencyTableLayout(columns('message_id', 'claimed_at:timestamptz', 'confirmed:boolean')),
    ).toBe('dotnet')
    expect(
      idempotencyTableLayout(columns('key', 'handled_at:timestamptz', 'confirmed:boolean')),
    ).toBe('go')
  })

  it('answers undefined for a table of no known layout, one column short of one included', () => {
    expect(idempotencyTableLayout(columns('id', 'seen_at'))).toBeUndefined()
    expect(idempotencyTableLayout(OWN.slice(0, 4))).toBeUndefined()
    expect(idempotencyTableLayout([])).toBeUndefined()
  })
})

describe('foreignIdempotencyTable', () => {
  it("is undefined for this library's table", () => {
    expect(foreignIdempotencyTable('acemq_idempotency', OWN)).toBeUndefined()
  })

  it("names the library, the columns found and the remedy, a table of the store's own", () => {
    expect(foreignIdempotencyTable('acemq_idempotency', JAVA)).toBe(
      "the idempotency table acemq_idempotency has the layout of the Java / Ruby AceMQ library (message_id, state, claimed_by, recorded_at, expires_at), not this library's (id, owner, claimed_at, confirmed, confirmed_at): another service in this database created it. Give this store a table of its own ({ table: 'acemq_idempotency_ts' }) and create it with createTableSql(); a table's layout is never changed in place",
    )
  })

  it('keeps the schema in the suggested name and the name within 63 characters', () => {
    const long = 'x'.repeat(63)
    expect(
      foreignIdempotencyTable(`audit.${long}`, columns('key', 'handled_at', 'confirmed')),
    ).toContain(`{ table: 'audit.${'x'.repeat(60)}_ts' }`)
  })

  it('lists what an unknown table has and what the store needs', () => {
    expect(foreignIdempotencyTable('seen', columns('id', 'seen_at'))).toBe(
      "the idempotency table seen exists without the columns this store uses (id, owner, claimed_at, confirmed, confirmed_at); it has id, seen_at: give this store a table of its own ({ table: 'seen_ts' }) and create it with createTableSql(); a table's layout is never changed in place",
    )
    // None found: the table was not where the store looked; nothing can be said of it.
    expect(foreignIdempotencyTable('seen', [])).toBeUndefined()
  })
})

describe('foreignIdempotencyTable, for each library of the family', () => {
  it.each([
    [
      'the Python AceMQ library',
      columns('message_id', 'state', 'claimed_by', 'recorded_at:bigint', 'expires_at:bigint'),
    ],
    ['the .NET AceMQ library', columns('message_id', 'claimed_at', 'confirmed:boolean')],
    ['the Go AceMQ library', columns('key', 'handled_at', 'confirmed:boolean')],
  ])('names %s', (library, found) => {
    expect(foreignIdempotencyTable('acemq_idempotency', found)).toContain(
      `has the layout of ${library} (${found.map((c) => c.name).join(', ')})`,
    )
  })
})
