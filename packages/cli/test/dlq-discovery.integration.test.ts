import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { eventually, requireRabbit } from '@acemq/testing'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import {
  startManagementNode,
  type ManagementNode,
} from '../../../test-support/rabbitmq-management-node.js'
import { runCli, type CliRun } from './support/run-cli.js'

const hasRabbit = await requireRabbit()

/** A password that must never be printed, percent-encoded in URLs. */
const SECRET = 'm@nage/s3cret'
const secretInUrl = encodeURIComponent(SECRET)

// The management plugin runs on an extra node of this file's own: the main broker's
// configuration is never changed.
describe.runIf(hasRabbit)('acemq dlq list with no names, through the management API', () => {
  let mgmt: ManagementNode
  let admin: AmqpAdmin
  let opsUrl: string
  const hourAgo = Math.floor(Date.now() / 1_000) - 3_600

  beforeAll(async () => {
    mgmt = await startManagementNode('acemq-dlq-discovery')
    await mgmt.addVhost('orders')
    await mgmt.addUser('ops', SECRET, ['monitoring'], 'orders')
    opsUrl = `amqp://ops:${secretInUrl}@127.0.0.1:${mgmt.node.amqpPort}/orders`
    admin = await AmqpAdmin.open(`${mgmt.node.url}/orders`)
    const channel = admin.channel
    await channel.assertQueue('orders.placed', { durable: true })
    await channel.assertQueue('orders.placed.dlq', { durable: true })
    await channel.assertQueue('orders.placed.parked', {
      durable: true,
      arguments: { 'x-queue-type': 'quorum' },
    })
    await channel.assertQueue('orders.dlq-not', { durable: true })
    for (let i = 0; i < 3; i++) {
      channel.sendToQueue('orders.placed.dlq', Buffer.from(`{"n":${i}}`), {
        persistent: true,
        timestamp: hourAgo + i,
        headers: { 'x-acemq-error': `boom ${i}` },
      })
    }
    channel.sendToQueue('orders.placed.parked', Buffer.from('{}'), { persistent: true })
    await channel.waitForConfirms()
    await channel.consume('orders.placed.parked', () => undefined, { noAck: false })
    // A dead-letter queue on another vhost is not this one's.
    const other = await AmqpAdmin.open(mgmt.node.url)
    await other.channel.assertQueue('billing.dlq', { durable: true })
    await other.close()
  }, 120_000)

  afterAll(async () => {
    await admin?.close()
    await mgmt?.stop()
  })

  /** `dlq list` (human) on `vhost` of the extra node, as guest. */
  const listAsGuestOn = (vhost: string): Promise<CliRun> =>
    runCli([
      'dlq',
      'list',
      '--url',
      `amqp://guest:guest@127.0.0.1:${mgmt.node.amqpPort}/${vhost}`,
      '--management-url',
      mgmt.managementUrl,
    ])

  /** Runs `dlq list --json` until the broker's statistics show the counts sent. */
  async function listUntilCounted(args: readonly string[]): Promise<CliRun> {
    let run: CliRun | undefined
    await eventually(
      async () => {
        run = await runCli(['--json', 'dlq', 'list', ...args])
        if (run.code !== 0) return true
        const queues = (JSON.parse(run.stdout) as { queues: { messages?: number }[] }).queues
        return (
          queues.length === 2 && queues.every((q) => q.messages !== undefined && q.messages > 0)
        )
      },
      20_000,
      'the management API reported the queues’ counts',
    )
    return run as CliRun
  }

  it('finds every .dlq and .parked queue of the vhost with its depth, consumers and the age of its oldest message', async () => {
    const run = await listUntilCounted(['--url', opsUrl, '--management-url', mgmt.managementUrl])
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    const answer = JSON.parse(run.stdout) as {
      vhost: string
      management: string
      discovered: boolean
      queues: {
        queue: string
        type: string
        messages: number
        consumers: number
        oldestAgeMs?: number
      }[]
    }
    expect(answer.vhost).toBe('orders')
    expect(answer.management).toBe(mgmt.managementUrl)
    expect(answer.queues.map((q) => [q.queue, q.type, q.messages, q.consumers])).toEqual([
      ['orders.placed.dlq', 'classic', 3, 0],
      ['orders.placed.parked', 'quorum', 1, 1],
    ])
    // The head message was stamped an hour ago; RabbitMQ gives no head age for a quorum queue.
    const age = answer.queues[0]?.oldestAgeMs ?? 0
    expect(age).toBeGreaterThanOrEqual(3_590_000)
    expect(age).toBeLessThan(3_700_000)
    expect(answer.queues[1]).not.toHaveProperty('oldestAgeMs')

    const human = await runCli([
      'dlq',
      'list',
      '--url',
      opsUrl,
      '--management-url',
      mgmt.managementUrl,
    ])
    expect(human.code).toBe(0)
    const lines = human.stdout.split('\n')
    expect(lines[0]).toBe(
      `broker amqp://ops:***@127.0.0.1:${mgmt.node.amqpPort}/orders, vhost orders, management API ${mgmt.managementUrl}`,
    )
    expect(lines[1]).toMatch(/^QUEUE\s+TYPE\s+MESSAGES\s+CONSUMERS\s+OLDEST$/)
    expect(lines[2]).toMatch(/^orders\.placed\.dlq\s+classic\s+3\s+0\s+1h( 0m)?$/)
    expect(lines[3]).toMatch(/^orders\.placed\.parked\s+quorum\s+1\s+1\s+-$/)
    expect(human.stdout + human.stderr).not.toContain('s3cret')
  })

  it('logs in with the management URL’s own user when it has one, and never prints its password', async () => {
    const withLogin = `http://ops:${secretInUrl}@127.0.0.1:${mgmt.managementPort}/`
    const run = await listUntilCounted([
      '--url',
      `amqp://guest:guest@127.0.0.1:${mgmt.node.amqpPort}/orders`,
      '--management-url',
      withLogin,
    ])
    expect(run.code).toBe(0)
    expect(JSON.parse(run.stdout)).toMatchObject({ management: mgmt.managementUrl })
    expect(run.stdout + run.stderr).not.toMatch(/s3cret|m%40nage|m@nage/)
  })

  it('fails with the user’s name and without the password when the management API refuses the login', async () => {
    const wrong = `amqp://ops:wrong-${secretInUrl}@127.0.0.1:${mgmt.node.amqpPort}/orders`
    const run = await runCli([
      'dlq',
      'list',
      '--url',
      wrong,
      '--management-url',
      mgmt.managementUrl,
    ])
    expect(run.code).toBe(1)
    expect(run.stderr).toContain(
      `the management API at ${mgmt.managementUrl} refused the login of user 'ops' (401)`,
    )
    expect(run.stdout + run.stderr).not.toMatch(/s3cret|m%40nage|m@nage/)
  })

  it('fails, naming the vhost, when the management API knows no such vhost', async () => {
    const run = await listAsGuestOn('nowhere')
    expect(run.code).toBe(1)
    expect(run.stderr).toContain("knows no virtual host 'nowhere' (404)")
  })

  it('says nothing was found, and exits 1, on a vhost with no dead-letter queue', async () => {
    await mgmt.addVhost('empty')
    const run = await listAsGuestOn('empty')
    expect(run.code).toBe(1)
    expect(run.stdout).toContain('no dead-letter or parked queue on this virtual host')
  })

  it('keeps the named-queue mode when --queues is given, over AMQP alone', async () => {
    const run = await runCli([
      '--json',
      'dlq',
      'list',
      '--queues',
      'orders.placed',
      '--url',
      opsUrl,
    ])
    expect(run.code).toBe(0)
    expect(JSON.parse(run.stdout)).toMatchObject({
      queues: [{ queue: 'orders.placed.dlq', messages: 3 }, { queue: 'orders.placed.parked' }],
      missing: [],
    })
  })
})
