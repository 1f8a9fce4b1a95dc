import { describe, expect, it } from 'vitest'
import {
  SQL_DIALECTS,
  idempotencyTableStatements,
  outboxTableStatements,
  redactSecrets,
  sqlScript,
} from '@acemq/core/spi'
import { runCli } from './support/run-cli.js'

// The built binary as an operator runs it; none of these needs a broker.
describe('acemq without a broker', () => {
  const commands = [
    [],
    ['dlq'],
    ['dlq', 'list'],
    ['dlq', 'peek'],
    ['dlq', 'replay'],
    ['topology'],
    ['topology', 'plan'],
    ['health'],
    ['store'],
    ['store', 'sql'],
    ['outbox'],
    ['outbox', 'sql'],
    ['schedule'],
    ['schedule', 'list'],
  ]

  it.each(commands.map((c) => [c.join(' ') || '(the program)', c] as const))(
    'answers --help for %s with its usage and exit code 0',
    async (_name, command) => {
      const run = await runCli([...command, '--help'])
      expect(run.code).toBe(0)
      expect(run.stdout).toMatch(/^Usage: acemq/)
      expect(run.stdout).toContain('--help')
    },
  )

  it('exits 2 on an unknown command, an unknown option or a bad value, saying what is wrong', async () => {
    const unknown = await runCli(['frobnicate'])
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toContain("unknown command 'frobnicate'")
    const option = await runCli(['store', 'sql', '--colour'])
    expect(option.code).toBe(2)
    expect(option.stderr).toContain("unknown option '--colour'")
    const dialect = await runCli(['store', 'sql', '--dialect', 'oracle'])
    expect(dialect.code).toBe(2)
    expect(dialect.stderr).toContain('oracle')
    const retry = await runCli(['topology', 'plan', 'orders', '--retry', 'sometimes(3)'])
    expect(retry.code).toBe(2)
    expect(retry.stderr).toContain('--retry must look like')
  })

  it('prints the idempotency table DDL for each dialect, and the outbox table DDL', async () => {
    const postgres = await runCli(['store', 'sql'])
    expect(postgres.code).toBe(0)
    expect(postgres.stdout).toContain('CREATE TABLE IF NOT EXISTS "acemq_idempotency"')
    const mysql = await runCli(['store', 'sql', '--dialect', 'mysql', '--table', 'app.seen'])
    expect(mysql.stdout).toContain('CREATE TABLE IF NOT EXISTS `app`.`seen`')
    const outbox = await runCli(['--json', 'outbox', 'sql', '--dialect', 'sqlite'])
    const parsed = JSON.parse(outbox.stdout) as { dialect: string; table: string; sql: string }
    expect(parsed.dialect).toBe('sqlite')
    expect(parsed.table).toBe('acemq_outbox')
    expect(parsed.sql).toContain('body BLOB NOT NULL')
  })

  it('prints for every dialect exactly the DDL the stores write, from core', async () => {
    for (const dialect of SQL_DIALECTS) {
      const store = await runCli(['--json', 'store', 'sql', '--dialect', dialect])
      expect((JSON.parse(store.stdout) as { sql: string }).sql).toBe(
        sqlScript(idempotencyTableStatements('acemq_idempotency', dialect)),
      )
      const outbox = await runCli(['--json', 'outbox', 'sql', '--dialect', dialect])
      expect((JSON.parse(outbox.stdout) as { sql: string }).sql).toBe(
        sqlScript(outboxTableStatements('acemq_outbox', dialect)),
      )
    }
  })

  it('plans the topology of a queue with a retry policy, for people and as JSON', async () => {
    const human = await runCli([
      'topology',
      'plan',
      'orders.placed',
      '--retry',
      'exponential(5,1s,1m)',
    ])
    expect(human.code).toBe(0)
    expect(human.stdout).toContain('schedule 1000ms, 2000ms, 4000ms, 8000ms')
    expect(human.stdout).toContain('queue    orders.placed.dlq (classic, durable)')
    const json = await runCli([
      'topology',
      'plan',
      'orders.placed',
      '--retry',
      'exponential(5, 1s, 1m)',
      '--json',
    ])
    const plan = JSON.parse(json.stdout) as {
      schedule: number[]
      declarations: { kind: string; name?: string; arguments: Record<string, unknown> }[]
    }
    expect(plan.schedule).toEqual([1000, 2000, 4000, 8000])
    const source = plan.declarations.find((d) => d.kind === 'queue' && d.name === 'orders.placed')
    expect(source?.arguments['x-dead-letter-routing-key']).toBe('orders.placed.dlq')
    // Waits of 30 s and more are spent in the broker: they get rung queues.
    const long = await runCli(['--json', 'topology', 'plan', 'slow', '--retry', 'fixed(3,1m)'])
    const rungs = (JSON.parse(long.stdout) as typeof plan).declarations.filter(
      (d) => d.kind === 'queue' && d.name === 'slow.retry.1m',
    )
    expect(rungs[0]?.arguments['x-message-ttl']).toBe(60_000)
  })

  it('reports DOWN with exit code 1 when the broker cannot be reached, never printing the password', async () => {
    const secret = 's3cr#t/pa@ss'
    const url = `amqp://ops:${encodeURIComponent(secret)}@127.0.0.1:1`
    for (const args of [
      ['health', '--url', url],
      ['health', '--json'],
    ]) {
      const run = await runCli(args, { env: { AMQP_URL: url } })
      expect(run.code).toBe(1)
      expect(run.stdout).toContain('DOWN')
      for (const form of [secret, encodeURIComponent(secret)]) {
        expect(run.stdout).not.toContain(form)
        expect(run.stderr).not.toContain(form)
      }
    }
    const replay = await runCli(['dlq', 'replay', 'orders.dlq', '--url', url])
    expect(replay.code).toBe(1)
    expect(replay.stderr).toMatch(/^error: /)
    expect(replay.stderr).not.toContain(encodeURIComponent(secret))
  })

  it('exits 2 for a queue name over 255 bytes, naming the argument, before it connects', async () => {
    const name = 'q'.repeat(256)
    const run = await runCli(['dlq', 'list', '--queues', name, '--url', 'amqp://127.0.0.1:1'])
    expect(run.code).toBe(2)
    expect(run.stderr).toContain('--queues')
    expect(run.stderr).toContain('256 bytes')
    const derived = await runCli([
      'dlq',
      'list',
      '--queues',
      'q'.repeat(252),
      '--url',
      'amqp://127.0.0.1:1',
    ])
    expect(derived.code).toBe(2)
    expect(derived.stderr).toContain('.dlq')
  })

  it('with --json, prints every error as one JSON object on standard output', async () => {
    const usage = await runCli(['--json', 'dlq', 'list', '--queues', 'q'.repeat(256)])
    expect(usage.code).toBe(2)
    expect(JSON.parse(usage.stdout)).toMatchObject({ error: { code: 'USAGE', exitCode: 2 } })
    const option = await runCli(['--json', 'store', 'sql', '--colour'])
    expect(option.code).toBe(2)
    expect(JSON.parse(option.stdout)).toMatchObject({
      error: { code: 'USAGE', exitCode: 2, message: "unknown option '--colour'" },
    })
    const secret = 's3cr#t'
    const down = await runCli([
      '--json',
      'dlq',
      'peek',
      'orders.dlq',
      '--url',
      `amqp://ops:${encodeURIComponent(secret)}@127.0.0.1:1`,
    ])
    expect(down.code).toBe(1)
    const parsed = JSON.parse(down.stdout) as { error: { code: string; message: string } }
    expect(parsed.error.code).toBe('ACEMQ_CONNECTION_FAILED')
    expect(parsed.error.message).toContain('amqp://ops:***@127.0.0.1:1')
    expect(down.stdout).not.toContain(encodeURIComponent(secret))
  })

  it('hides the password but never the user name, even when they are the same', () => {
    expect(
      redactSecrets(
        "user 'guest' at amqp://guest:guest@rabbit: rabbitmqctl set_permissions -p 'x' 'guest'",
        ['guest'],
        'guest',
      ),
    ).toBe("user 'guest' at amqp://guest:***@rabbit: rabbitmqctl set_permissions -p 'x' 'guest'")
    expect(redactSecrets("user 'opsadmin', password ops", ['ops'], 'opsadmin')).toBe(
      "user 'opsadmin', password ***",
    )
    expect(redactSecrets("user 'ops' password ops-secret", ['ops-secret'], 'ops')).toBe(
      "user 'ops' password ***",
    )
  })
})

describe('acemq console', () => {
  it('runs acemq-console from @acemq/console, which refuses to start without a token (exit 2) and prints its usage on --help', async () => {
    const refused = await runCli(['console', '--archive', 'sqlite:never.db', '--queues', 'q.dlq'], {
      env: { ACEMQ_CONSOLE_TOKEN: undefined, AMQP_URL: 'amqp://ops:s3cret@127.0.0.1:1' },
    })
    expect(refused.code).toBe(2)
    expect(refused.stderr).toContain('refuses to start without a token in ACEMQ_CONSOLE_TOKEN')
    expect(refused.stdout + refused.stderr).not.toContain('s3cret')
    const help = await runCli(['console', '--help'])
    expect(help.code).toBe(0)
    expect(help.stdout).toMatch(/^Usage: acemq-console --url/)
  })
})
