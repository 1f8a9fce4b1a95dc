import { existsSync } from 'node:fs'
import { beforeAll, describe, expect, it } from 'vitest'
import { expectRepeatable } from '../../test-support/repeatable.js'
import { runExample } from '../../test-support/run-example.js'
import { expectLinesInOrder } from '../../test-support/expect-lines.js'
import { printedHealth, reportedDuration, story } from './story.js'

describe('pnpm demo on the embedded default (in-memory transport, SQLite)', () => {
  let code: number | string
  let output: string

  beforeAll(async () => {
    // Unset, so the default is what runs even where CI exports the service URLs.
    ;({ code, output } = await runExample('demo', { AMQP_URL: undefined, DATABASE_URL: undefined }))
  }, 60_000)

  it('exits 0', () => {
    expect(code, output).toBe(0)
  })

  it('runs on the in-memory transport and a temporary SQLite file', () => {
    expectLinesInOrder(output, [
      /^AceMQ demo: order processing$/,
      /transport +in-memory \(set AMQP_URL to use RabbitMQ\)/,
      /store +SQLite \/.+\/idempotency\.db \(set DATABASE_URL to use Postgres\)/,
    ])
  })

  it.each(story)('shows that %s', (_, lines) => {
    expectLinesInOrder(output, lines)
  })

  it('jitters the consumer waits within ±20 % of the schedule', () => {
    const waits = [...output.matchAll(/o-1001 +retried: waited (\d+) ms/g)].map((m) => Number(m[1]))
    expect(waits).toHaveLength(2)
    expect(waits[0]).toBeGreaterThanOrEqual(160)
    expect(waits[0]).toBeLessThanOrEqual(240)
    expect(waits[1]).toBeGreaterThanOrEqual(320)
    expect(waits[1]).toBeLessThanOrEqual(480)
  })

  it('prints health JSON that parses, with the connection and the SQLite store UP', () => {
    const health = printedHealth(output)
    expect(health.status).toBe('UP')
    expect(health.inFlight).toBe(0)
    expect(health.components['connection']).toMatchObject({ status: 'UP', open: 'true', held: '0' })
    expect(health.components['idempotency-store']).toEqual({ status: 'UP', store: 'sqlite' })
  })

  it('removes its temporary SQLite directory', () => {
    const dir = /cleaned up: deleted \d+ demo queues, removed (.+)$/m.exec(output)?.[1]
    expect(dir).toBeDefined()
    expect(existsSync(dir as string)).toBe(false)
  })

  it('finishes in well under a minute', () => {
    expect(reportedDuration(output)).toBeLessThan(20_000)
  })

  it('runs twice with the same output', async () => {
    await expectRepeatable(
      'demo',
      { AMQP_URL: undefined, DATABASE_URL: undefined },
      // Each run has a temporary directory of its own; its scenes run concurrently, so lines from
      // two of them may interleave differently on a loaded machine.
      {
        anyOrder: true,
        normalize: (line) => line.replace(/\/\S*acemq\S*/g, '<temporary>'),
      },
    )
  }, 120_000)
})
