import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readEnvelope } from '@acemq/core/spi'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { AMQP_URL, requireRabbit, uniqueName } from '@acemq/testing'
import { runCli } from './support/run-cli.js'

const hasRabbit = await requireRabbit()

/** The broker line every answer starts with: the URL without its password. */
const redacted = (() => {
  const url = new URL(AMQP_URL)
  if (url.password !== '') url.password = '***'
  return url.toString().replace(/\/$/, '')
})()

/** Puts `count` dead-lettered messages on `queue` with one confirm wait. */
async function fill(admin: AmqpAdmin, queue: string, count: number, prefix = 'm'): Promise<void> {
  const channel = admin.channel
  for (let i = 0; i < count; i++) {
    channel.sendToQueue(queue, Buffer.from(JSON.stringify({ n: i })), {
      persistent: true,
      contentType: 'application/json',
      messageId: `${prefix}-${i}`,
      headers: {
        'x-acemq-id': `${prefix}-${i}`,
        'x-acemq-attempt': 3,
        'x-acemq-first-seen': Date.now() - 7_200_000,
        'x-acemq-error': `gave up after 3 attempt(s): boom ${i}`,
      },
    })
    // Let the socket drain now and then rather than buffer all of it.
    if (i % 1_000 === 999) await channel.waitForConfirms()
  }
  await channel.waitForConfirms()
}

/** Takes every message off `queue` (acked) and returns their ids, in order. */
async function drainIds(admin: AmqpAdmin, queue: string): Promise<string[]> {
  const ids: string[] = []
  for (;;) {
    const message = await admin.get(queue)
    if (message === undefined) return ids
    ids.push(readEnvelope(message.headers, { routingKey: queue }).envelope.id)
  }
}

describe.runIf(hasRabbit)('acemq against RabbitMQ (the built binary)', () => {
  let admin: AmqpAdmin
  const queues: string[] = []
  const declare = async (): Promise<string> => {
    const queue = uniqueName('cli')
    queues.push(queue, `${queue}.dlq`)
    await admin.channel.assertQueue(queue, { durable: true })
    await admin.channel.assertQueue(`${queue}.dlq`, { durable: true })
    return queue
  }

  beforeAll(async () => {
    admin = await AmqpAdmin.open()
  })

  afterAll(async () => {
    await admin.deleteQueues(...queues)
    await admin.close()
  })

  it('lists the dead-letter queues of the queues it is given, with their counts, and the ones not declared', async () => {
    const queue = await declare()
    await fill(admin, `${queue}.dlq`, 3)
    const human = await runCli(['dlq', 'list', '--queues', `${queue},${queue}-gone`], {
      env: { AMQP_URL },
    })
    expect(human.code).toBe(0)
    expect(human.stdout.split('\n')[0]).toBe(`broker ${redacted}, vhost /`)
    expect(human.stdout).toMatch(new RegExp(`${queue.replace('.', '\\.')}\\.dlq\\s+3`))
    expect(human.stdout).toContain(`not declared: ${queue}.parked, ${queue}-gone.dlq`)
    const json = await runCli(['--json', 'dlq', 'list', '--queues', queue, '--url', AMQP_URL])
    expect(JSON.parse(json.stdout)).toEqual({
      broker: redacted,
      vhost: '/',
      named: [{ name: queue, kind: 'queue', sources: [queue] }],
      queues: [{ queue: `${queue}.dlq`, messages: 3 }],
      missing: [`${queue}.parked`],
    })
    // No names: the main broker has no management API on its host's port 15672, so discovery
    // fails (exit 1) and says to name the queues.
    const none = await runCli(['dlq', 'list'], { env: { AMQP_URL } })
    expect(none.code).toBe(1)
    expect(none.stderr).toContain('did not answer')
    expect(none.stderr).toContain('name the queues with --queues')
  })

  it('peeks at the reasons, attempts and ages and leaves the queue exactly as it was', async () => {
    const queue = await declare()
    await fill(admin, `${queue}.dlq`, 5)
    const run = await runCli(['dlq', 'peek', `${queue}.dlq`, '-n', '3'], { env: { AMQP_URL } })
    expect(run.code).toBe(0)
    expect(run.stdout).toContain(`${queue}.dlq: 5 messages; the first 3:`)
    expect(run.stdout).toContain('1. m-0  attempt 3  age 2h')
    expect(run.stdout).toContain('reason: gave up after 3 attempt(s): boom 2')
    expect(run.stdout).not.toContain('m-3')
    // A classic queue takes each back in its place: 3 returns, and the first once more.
    expect(run.stdout).toContain(
      "gave back 4 message(s); on RabbitMQ 4.0 to 4.2 each return counts toward a quorum queue's delivery limit",
    )
    const json = await runCli(['--json', 'dlq', 'peek', `${queue}.dlq`, '--count', '2'], {
      env: { AMQP_URL },
    })
    const parsed = JSON.parse(json.stdout) as {
      messages: { id: string; attempt: number; reason: string }[]
      returned: number
      wentRound: boolean
    }
    expect([parsed.returned, parsed.wentRound]).toEqual([3, false])
    expect(parsed.messages.map((m) => [m.id, m.attempt, m.reason])).toEqual([
      ['m-0', 3, 'gave up after 3 attempt(s): boom 0'],
      ['m-1', 3, 'gave up after 3 attempt(s): boom 1'],
    ])
    expect(await admin.count(`${queue}.dlq`)).toBe(5)
    expect(await drainIds(admin, `${queue}.dlq`)).toEqual(['m-0', 'm-1', 'm-2', 'm-3', 'm-4'])
  })

  it('replays 10,000 messages with progress: every one moved once, at attempt 1, none left behind', async () => {
    const queue = await declare()
    await fill(admin, `${queue}.dlq`, 10_000)
    const started = performance.now()
    const run = await runCli(['dlq', 'replay', `${queue}.dlq`, '--progress'], {
      env: { AMQP_URL },
      timeoutMs: 170_000,
    })
    const seconds = (performance.now() - started) / 1000
    expect(run.stderr).toMatch(/\[[=-]+\] \d+\/10000 looked at/)
    expect(run.stderr).toContain('10000/10000 looked at, 10000 moved')
    expect(run.code).toBe(0)
    expect(run.stdout.trim()).toBe(`moved 10000 messages from ${queue}.dlq to ${queue}`)
    expect(await admin.count(`${queue}.dlq`)).toBe(0)
    expect(await admin.count(queue)).toBe(10_000)
    const first = await admin.get(queue)
    const { envelope, headers } = readEnvelope(first?.headers, { routingKey: queue })
    expect(envelope.attempt).toBe(1)
    expect(envelope.error).toBeUndefined()
    expect(headers['acemq-replayed-from']).toBe(`${queue}.dlq`)
    console.log(`replayed 10,000 messages in ${seconds.toFixed(1)} s`)
  }, 180_000)

  it('replays at most --max into --into, keeping attempts when asked, and says so as JSON', async () => {
    const queue = await declare()
    const other = await declare()
    await fill(admin, `${queue}.dlq`, 4)
    const run = await runCli(
      ['--json', 'dlq', 'replay', `${queue}.dlq`, '--into', other, '--max', '3', '--keep-attempts'],
      { env: { AMQP_URL } },
    )
    expect(run.code).toBe(0)
    expect(JSON.parse(run.stdout)).toEqual({
      broker: redacted,
      vhost: '/',
      source: `${queue}.dlq`,
      target: other,
      moved: 3,
      waitingBefore: 4,
    })
    expect(run.stderr).toBe('')
    expect(await admin.count(`${queue}.dlq`)).toBe(1)
    const copy = await admin.get(other)
    expect(readEnvelope(copy?.headers, { routingKey: other }).envelope.attempt).toBe(3)
  })

  it('exits 1 and leaves every message on the source when the target does not exist; 2 for a replay into itself', async () => {
    const queue = await declare()
    await fill(admin, `${queue}.dlq`, 2)
    const missing = await runCli(['dlq', 'replay', `${queue}.dlq`, '--into', `${queue}-nowhere`], {
      env: { AMQP_URL },
    })
    expect(missing.code).toBe(1)
    expect(missing.stderr).toContain(
      `error: replay of '${queue}.dlq' into '${queue}-nowhere' stopped after moving 0 message(s): message 'm-0' could not be written (`,
    )
    expect(await admin.count(`${queue}.dlq`)).toBe(2)
    const json = await runCli(
      ['--json', 'dlq', 'replay', `${queue}.dlq`, '--into', `${queue}-nowhere`],
      { env: { AMQP_URL } },
    )
    expect(json.code).toBe(1)
    expect(JSON.parse(json.stdout)).toMatchObject({
      error: { code: 'ACEMQ_UNROUTABLE', exitCode: 1, moved: 0, notWritten: ['m-0', 'm-1'] },
    })
    expect(await drainIds(admin, `${queue}.dlq`)).toEqual(['m-0', 'm-1'])
    const itself = await runCli(['dlq', 'replay', `${queue}.dlq`, '--into', `${queue}.dlq`], {
      env: { AMQP_URL },
    })
    expect(itself.code).toBe(2)
    expect(itself.stderr).toContain('into itself')
  })

  it('reports the connection UP with exit code 0, showing the broker without its password', async () => {
    const url = new URL(AMQP_URL)
    const run = await runCli(['health'], { env: { AMQP_URL } })
    expect(run.code).toBe(0)
    expect(run.stdout).toMatch(/^UP\nbroker .*, vhost \/\nconnection: UP/)
    if (url.password !== '') expect(run.stdout).not.toContain(`:${url.password}@`)
    const json = JSON.parse((await runCli(['health', '--json'], { env: { AMQP_URL } })).stdout) as {
      status: string
      broker: string
      vhost: string
    }
    expect(json).toMatchObject({ status: 'UP', broker: redacted, vhost: '/' })
  })
})

describe.runIf(hasRabbit)('acemq and the library’s own queues (the built binary)', () => {
  let admin: AmqpAdmin
  const queues: string[] = []
  const declareAll = async (...names: string[]): Promise<void> => {
    for (const name of names) {
      queues.push(name)
      await admin.channel.assertQueue(name, { durable: true })
    }
  }

  beforeAll(async () => {
    admin = await AmqpAdmin.open()
  })

  afterAll(async () => {
    await admin.deleteQueues(...queues)
    await admin.close()
  })

  it('expands an ordered queue to its partitions’ dead-letter queues, found on the broker, or with --partitions', async () => {
    const ledger = uniqueName('cli.ledger')
    for (let p = 0; p < 3; p++) {
      await declareAll(`${ledger}.${p}`, `${ledger}.${p}.dlq`, `${ledger}.${p}.parked`)
    }
    await fill(admin, `${ledger}.2.dlq`, 1)
    const run = await runCli(['dlq', 'list', '--queues', ledger], { env: { AMQP_URL } })
    expect(run.code).toBe(0)
    expect(run.stdout).toContain(
      `${ledger}: ordered queue, 3 partition(s) (${ledger}.0 … ${ledger}.2)`,
    )
    expect(run.stdout).toMatch(new RegExp(`${ledger.replace('.', '\\.')}\\.2\\.dlq\\s+1`))
    expect(run.stdout).not.toContain('not declared')
    const json = await runCli(['--json', 'dlq', 'list', '--queues', ledger, '--partitions', '4'], {
      env: { AMQP_URL },
    })
    const parsed = JSON.parse(json.stdout) as { queues: { queue: string }[]; missing: string[] }
    expect(parsed.queues).toHaveLength(6)
    expect(parsed.missing).toEqual([`${ledger}.3.dlq`, `${ledger}.3.parked`])
  })

  it('expands a pipeline to its steps’ dead-letter queues with --steps, and says to use it when the name is no queue', async () => {
    const checkout = uniqueName('cli.checkout')
    for (const step of ['reserve', 'charge', 'ship']) {
      await declareAll(
        `${checkout}.${step}`,
        `${checkout}.${step}.dlq`,
        `${checkout}.${step}.parked`,
      )
    }
    await fill(admin, `${checkout}.charge.dlq`, 2)
    const run = await runCli(
      ['dlq', 'list', '--queues', checkout, '--steps', 'reserve,charge,ship'],
      { env: { AMQP_URL } },
    )
    expect(run.code).toBe(0)
    expect(run.stdout).toMatch(new RegExp(`${checkout.replace('.', '\\.')}\\.charge\\.dlq\\s+2`))
    expect(run.stdout.match(/\.dlq|\.parked/g)).toHaveLength(6)
    const bare = await runCli(['dlq', 'list', '--queues', checkout], { env: { AMQP_URL } })
    expect(bare.code).toBe(1)
    expect(bare.stdout).toContain(`${checkout}: no such queue`)
    expect(bare.stdout).toContain('--steps')
  })

  it('names the broker and vhost, and exits 1 when nothing it was asked about exists there', async () => {
    const gone = uniqueName('cli.gone')
    const run = await runCli(['dlq', 'list', '--queues', gone], { env: { AMQP_URL } })
    expect(run.code).toBe(1)
    expect(run.stdout).toContain(`broker ${redacted}, vhost /`)
    expect(run.stdout).toContain('no dead-letter or parked queue found')
  })

  it('peeks at a pipeline message’s step and route and an ordered message’s partition and key, warning where a replay goes', async () => {
    const checkout = uniqueName('cli.fulfil')
    const ledger = uniqueName('cli.nc')
    await declareAll(`${checkout}.charge.dlq`, `${ledger}.0`, `${ledger}.2`, `${ledger}.2.dlq`)
    admin.channel.sendToQueue(`${checkout}.charge.dlq`, Buffer.from('{}'), {
      headers: {
        'x-acemq-id': 'run-1',
        'x-acemq-type': `${checkout}.reserve`,
        'x-acemq-route': 'reserve,charge,ship',
        'x-acemq-route-position': 1,
        'x-acemq-error': 'card declined',
      },
    })
    admin.channel.sendToQueue(`${ledger}.2.dlq`, Buffer.from('{}'), {
      headers: {
        'x-acemq-id': 'entry-9',
        'x-acemq-type': ledger,
        'acemq-ordered-key': 'acct-7',
        'x-acemq-error': 'gave up after 3 attempt(s): bad amount',
      },
    })
    await admin.channel.waitForConfirms()
    const pipeline = await runCli(['dlq', 'peek', `${checkout}.charge.dlq`], { env: { AMQP_URL } })
    expect(pipeline.code).toBe(0)
    expect(pipeline.stdout).toContain('   step: charge (2 of 3)  route: reserve,charge,ship')
    const ordered = await runCli(['--json', 'dlq', 'peek', `${ledger}.2.dlq`], {
      env: { AMQP_URL },
    })
    const parsed = JSON.parse(ordered.stdout) as {
      messages: { partition: number; key: string }[]
      warning: string
    }
    expect(parsed.messages[0]).toMatchObject({ partition: 2, key: 'acct-7' })
    expect(parsed.warning).toContain('goes to the back of the partition')
    const replay = await runCli(['dlq', 'replay', `${ledger}.2.dlq`], { env: { AMQP_URL } })
    expect(replay.code).toBe(0)
    expect(replay.stderr).toContain(
      `warning: ${ledger}.2 is partition 2 of the ordered queue ${ledger}: a replayed message goes to the back of the partition`,
    )
  })

  it('prints a permission hint that can be pasted: the user name shown, the password hidden', async () => {
    const url = new URL(AMQP_URL)
    const vhost = uniqueName('nope')
    url.pathname = `/${vhost}`
    const run = await runCli(['dlq', 'list', '--queues', 'orders', '--url', url.toString()])
    expect(run.code).toBe(1)
    const user = decodeURIComponent(url.username)
    expect(run.stderr).toContain(
      `rabbitmqctl set_permissions -p '${vhost}' '${user}' '.*' '.*' '.*'`,
    )
    if (url.password !== '' && url.password !== user) expect(run.stderr).not.toContain(url.password)
  })
})
