import { describe, expect, it } from 'vitest'
import { outboxReofferStatement, outboxRetiredStatement } from '../../src/spi.js'

describe('the outbox statements tools run through a driver of their own', () => {
  it('re-offers the ids named in each dialect’s placeholders, or every retired record', () => {
    const pg = outboxReofferStatement('app.outbox', 'postgres', ['a', 'b'])
    expect(pg.sql).toContain('update "app"."outbox" set retired_at = null, attempts = 0')
    expect(pg.sql).toMatch(/and id in \(\$1, \$2\)$/)
    expect(pg.parameters).toEqual(['a', 'b'])
    const mysql = outboxReofferStatement('acemq_outbox', 'mysql', ['a'])
    expect(mysql.sql).toContain('update `acemq_outbox`')
    expect(mysql.sql).toMatch(/and id in \(\?\)$/)
    const all = outboxReofferStatement('acemq_outbox', 'sqlite')
    expect(all.sql).toMatch(/retired_at is not null$/i)
    expect(all.parameters).toEqual([])
  })

  it('lists retired records newest first, at most the limit, and refuses bad arguments by name', () => {
    expect(outboxRetiredStatement('acemq_outbox', 'sqlite', 5).sql).toMatch(
      /order by retired_at desc, id limit 5$/,
    )
    expect(() => outboxRetiredStatement('acemq_outbox', 'sqlite', 0)).toThrow(/limit/)
    expect(() => outboxRetiredStatement('outbox; drop', 'sqlite', 1)).toThrow(/table/)
    expect(() => outboxReofferStatement('acemq_outbox', 'postgres', [])).toThrow(/ids/)
  })
})
