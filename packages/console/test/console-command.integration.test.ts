import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { eventually, requireRabbit, uniqueName } from '@acemq/testing'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import { startManagementNode } from '../../../test-support/rabbitmq-management-node.js'

const hasRabbit = await requireRabbit()

/** The built binary, as `npx acemq-console` runs it. */
const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../dist/bin.js')

/** Starts the binary; resolves with the URL it serves, or with how it ended. */
function start(
  args: readonly string[],
  env: Record<string, string | undefined> = {},
): Promise<{ child: ChildProcess; url?: string; code?: number | null; stderr: string }> {
  if (!existsSync(BIN))
    throw new Error(`${BIN} does not exist: build the package first (pnpm build)`)
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, ACEMQ_CONSOLE_TOKEN: undefined, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stderr = ''
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`acemq-console did not start:\n${stderr}`)),
      30_000,
    )
    child.stdout?.on('data', (chunk: Buffer) => {
      const url = /serving (http:\/\/\S+)/.exec(chunk.toString())?.[1]
      if (url !== undefined) {
        clearTimeout(timer)
        resolve({ child, url, stderr })
      }
    })
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ child, code, stderr })
    })
  })
}

describe.runIf(hasRabbit)('acemq-console, the console on its own', () => {
  let vhost: BrokerVhost
  let admin: AmqpAdmin
  let dir: string
  const queue = uniqueName('console-cmd')

  beforeAll(async () => {
    vhost = await BrokerVhost.create('acemq-console-cmd')
    admin = await AmqpAdmin.open(vhost.url)
    await admin.channel.assertQueue(queue, { durable: true })
    await admin.channel.assertQueue(`${queue}.dlq`, { durable: true })
    admin.channel.sendToQueue(`${queue}.dlq`, Buffer.from('{"n":1}'), {
      headers: { 'x-acemq-id': 'cmd-1', 'x-acemq-error': 'boom' },
    })
    await admin.channel.waitForConfirms()
    dir = mkdtempSync(path.join(tmpdir(), 'acemq-console-cmd-'))
  })

  afterAll(async () => {
    await admin?.close()
    await vhost?.delete()
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  })

  it('refuses to start without a token or --insecure-loopback, exit code 2, and never prints the password', async () => {
    const run = await start(['--url', vhost.url, '--archive', `sqlite:${path.join(dir, 'a.db')}`])
    expect(run.code).toBe(2)
    expect(run.stderr).toContain('refuses to start without a token in ACEMQ_CONSOLE_TOKEN')
    const open = await start([
      '--url',
      vhost.url,
      '--archive',
      'sqlite:x.db',
      '--insecure-loopback',
      '--host',
      '0.0.0.0',
    ])
    expect(open.code).toBe(2)
    expect(open.stderr).toContain("insecureLoopbackOnly needs a loopback host; got host '0.0.0.0'")
    const badArchive = await start(['--url', vhost.url, '--archive', 'postgres-ish://u:secret@h'], {
      ACEMQ_CONSOLE_TOKEN: 'a-token-of-24-characters',
    })
    expect(badArchive.code).toBe(2)
    expect(badArchive.stderr).not.toContain('secret')
  })

  it('collects the named queues into a SQLite archive and serves them', async () => {
    const run = await start(
      [
        '--url',
        vhost.url,
        '--archive',
        `sqlite:${path.join(dir, 'archive.db')}`,
        '--queues',
        `${queue}.dlq`,
        '--port',
        '0',
      ],
      { ACEMQ_CONSOLE_TOKEN: 'a-token-of-24-characters' },
    )
    try {
      expect(run.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
      const headers = { authorization: 'Bearer a-token-of-24-characters' }
      await eventually(
        async () =>
          (await (await fetch(`${run.url}/messages`, { headers })).text()).includes('cmd-1'),
        10_000,
        'the dead letter listed',
      )
      expect(await vhost.counts(`${queue}.dlq`)).toEqual({ ready: 0, unacked: 0 })
      expect(await (await fetch(`${run.url}/`, { headers })).text()).toContain(`${queue}.dlq`)
    } finally {
      run.child.kill('SIGTERM')
      await new Promise((resolve) => run.child.once('close', resolve))
    }
  })

  it('with --management-url and no --queues, finds the vhost’s dead-letter queues on an extra node with the plugin, collects and lists them', async () => {
    const mgmt = await startManagementNode('acemq-console-mgmt')
    let child: ChildProcess | undefined
    try {
      const node = await AmqpAdmin.open(mgmt.node.url)
      await node.channel.assertQueue('billing.parked', { durable: true })
      node.channel.sendToQueue('billing.parked', Buffer.from('{}'), {
        headers: { 'x-acemq-id': 'parked-1', 'x-acemq-error': 'parked' },
      })
      await node.channel.waitForConfirms()
      await node.close()
      const run = await start(
        [
          '--url',
          mgmt.node.url,
          '--management-url',
          mgmt.managementUrl,
          '--archive',
          `sqlite:${path.join(dir, 'mgmt.db')}`,
          '--port',
          '0',
        ],
        { ACEMQ_CONSOLE_TOKEN: 'a-token-of-24-characters' },
      )
      child = run.child
      expect(run.url, run.stderr).toBeDefined()
      const headers = { authorization: 'Bearer a-token-of-24-characters' }
      await eventually(
        async () =>
          (await (await fetch(`${run.url}/messages`, { headers })).text()).includes('parked-1'),
        10_000,
        'the parked message collected',
      )
      expect(await (await fetch(`${run.url}/`, { headers })).text()).toContain('billing.parked')
    } finally {
      child?.kill('SIGTERM')
      if (child !== undefined && child.exitCode === null)
        await new Promise((resolve) => child?.once('close', resolve))
      await mgmt.stop()
    }
  }, 120_000)
})
