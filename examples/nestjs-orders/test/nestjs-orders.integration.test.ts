import { DATABASE_URL, requirePostgres, requireRabbit, uniqueName } from '@acemq/testing'
import pg from 'pg'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import { startExample, type RunningExample } from '../../test-support/run-example.js'

const ready = (await requireRabbit()) && (await requirePostgres())

describe.runIf(ready)('the nestjs-orders example on RabbitMQ and Postgres', () => {
  let vhost: BrokerVhost
  let pool: pg.Pool
  let name: string
  const running: RunningExample[] = []

  beforeAll(async () => {
    vhost = await BrokerVhost.create('acemq-nestjs-orders')
    pool = new pg.Pool({ connectionString: DATABASE_URL })
  })

  afterEach(async () => {
    for (const example of running.splice(0)) {
      if (example.process.exitCode === null) example.process.kill('SIGKILL')
    }
    await pool.query(`drop table if exists "${name}_handled", "${name}_seen"`)
  })

  afterAll(async () => {
    await pool?.end()
    await vhost?.delete()
  })

  function start(env: Record<string, string> = {}): RunningExample {
    const example = startExample('nestjs-orders', {
      AMQP_URL: vhost.url,
      DATABASE_URL,
      NAME: name,
      PORT: '0',
      ...env,
    })
    running.push(example)
    return example
  }

  async function urlOf(example: RunningExample): Promise<string> {
    const line = await example.waitFor(/^listening on /, 60_000)
    return line.slice('listening on '.length)
  }

  async function post(url: string, order: object): Promise<number> {
    const response = await fetch(`${url}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(order),
    })
    await response.text()
    return response.status
  }

  /** How many times each order was handled, from the handler's own rows. */
  async function handledCounts(): Promise<Map<string, number>> {
    const { rows } = await pool.query<{ id: string; n: string }>(
      `select id, count(*) as n from "${name}_handled" group by id`,
    )
    return new Map(rows.map((row) => [row.id, Number(row.n)]))
  }

  /** The broker's counts of the orders queue, which it publishes a few seconds late. */
  async function expectCounts(expected: { ready: number; unacked: number }): Promise<void> {
    await vi.waitFor(async () => expect(await vhost.counts(`${name}.placed`)).toEqual(expected), {
      timeout: 15_000,
      interval: 500,
    })
  }

  it('an order posted over HTTP is published, retried once and handled; terminus says UP', async () => {
    name = uniqueName('nestjs_orders').replaceAll(/\W/g, '_')
    const example = start()
    const url = await urlOf(example)

    expect(await post(url, { id: 'o-1', total: 10, failTimes: 1 })).toBe(202)
    await example.waitFor(/^o-1: handled$/)
    expect(example.output()).toMatch(
      /o-1: attempt 1 started\n[^]*o-1: attempt 2 started\n[^]*o-1: handled/,
    )
    expect(await handledCounts()).toEqual(new Map([['o-1', 1]]))

    const health = await fetch(`${url}/health`)
    expect(health.status).toBe(200)
    expect(await health.json()).toMatchObject({
      status: 'ok',
      info: {
        acemq: {
          status: 'up',
          connection: { status: 'UP', open: 'true' },
          consumers: { status: 'UP', count: '1' },
          'idempotency-store': { status: 'UP', table: `${name}_seen` },
        },
      },
    })

    example.process.kill('SIGTERM')
    expect(await example.exited(30_000)).toBe('SIGTERM')
    await expectCounts({ ready: 0, unacked: 0 })
  }, 120_000)

  it('SIGTERM mid-handler: running handlers finish, the rest go back on the queue, and a second process handles each remaining order once', async () => {
    name = uniqueName('nestjs_orders').replaceAll(/\W/g, '_')
    const orders = Array.from({ length: 12 }, (_, i) => `o-${i + 1}`)
    const first = start({ HANDLER_MS: '1500', CONCURRENCY: '3', SHUTDOWN_GRACE_MS: '10000' })
    const url = await urlOf(first)
    for (const id of orders) expect(await post(url, { id, total: 1 })).toBe(202)

    // Three handlers are running (and more are prefetched) when the deploy's SIGTERM comes.
    await vi.waitFor(
      () => expect(first.lines.filter((l) => / attempt 1 started$/.test(l))).toHaveLength(3),
      { timeout: 20_000, interval: 20 },
    )
    expect(first.lines.filter((l) => / handled$/.test(l))).toEqual([])
    first.process.kill('SIGTERM')
    expect(await first.exited(30_000), first.output()).toBe('SIGTERM')

    // Every handler that had started finished within the grace (none was cut off) ...
    const started = first.lines
      .filter((l) => / attempt 1 started$/.test(l))
      .map((l) => l.split(':')[0])
    // No handler started after the signal: the held deliveries were handed back, not run.
    expect(started).toHaveLength(3)
    const afterFirst = await handledCounts()
    expect([...afterFirst.keys()].sort()).toEqual([...started].sort())
    expect([...afterFirst.values()].every((n) => n === 1)).toBe(true)
    // ... and everything else is back on the queue, not lost, not held by a dead consumer.
    await expectCounts({ ready: orders.length - afterFirst.size, unacked: 0 })

    const second = start({ HANDLER_MS: '0' })
    await urlOf(second)
    await vi.waitFor(async () => expect((await handledCounts()).size).toBe(orders.length), {
      timeout: 30_000,
      interval: 100,
    })
    const counts = await handledCounts()
    expect(orders.filter((id) => counts.get(id) !== 1)).toEqual([])
    expect(second.lines.filter((l) => / handled$/.test(l))).toHaveLength(
      orders.length - afterFirst.size,
    )
    second.process.kill('SIGTERM')
    expect(await second.exited(30_000)).toBe('SIGTERM')
    await expectCounts({ ready: 0, unacked: 0 })
  }, 180_000)
})
