import { spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { requireRabbit, uniqueName } from '@acemq/testing'
import { BrokerVhost } from '../../test-support/broker-vhost.js'
import { packPackages, root, sh } from './packing.js'

// What a newcomer does from the READMEs alone: install from the registry with plain npm (the
// @acemq packages from their packed tarballs, as they will be published; everything else from
// the npm registry), compile, run. One fresh npm project, installed once, serves every test here.

const hasRabbit = await requireRabbit()
const work = mkdtempSync(path.join(tmpdir(), 'acemq-registry-install-'))
const app = path.join(work, 'app')
const QUICK_START = '## Quick start: a service from npm'

afterAll(() => {
  rmSync(work, { recursive: true, force: true })
})

/** The fenced blocks of `language` in the section of `readme` under `heading`, in order. */
function blocks(readme: string, heading: string, language: string): string[] {
  const text = readFileSync(path.join(root, readme), 'utf8')
  const start = text.startsWith(`${heading}\n`) ? 0 : text.indexOf(`\n${heading}\n`)
  if (start < 0) throw new Error(`${readme} has no section ${heading}`)
  const end = text.indexOf('\n## ', start + heading.length + 2)
  const section = text.slice(start, end < 0 ? undefined : end)
  return [...section.matchAll(/^```(\w+)\n([\s\S]*?)^```$/gm)]
    .filter((match) => match[1] === language)
    .map((match) => match[2] ?? '')
}

/** The README's command lines, the `@acemq/*` names pointed at their tarballs. */
function commands(block: string, tarballs: Record<string, string>): string[] {
  return block
    .split('\n')
    .map((line) => line.replace(/\s+#.*$/, '').trim())
    .filter((line) => line !== '')
    .map((line) => line.replace(/@acemq\/[\w-]+/g, (name) => tarballs[name] ?? name))
}

/** npm as a newcomer runs it, without the audit and funding chatter. */
const npmEnv: NodeJS.ProcessEnv = {
  ...process.env,
  npm_config_audit: 'false',
  npm_config_fund: 'false',
  npm_config_update_notifier: 'false',
}

let tarballs: Promise<Record<string, string>> | undefined
let installed: Promise<void> | undefined

/** The packed packages, packed once for the file. */
function packed(): Promise<Record<string, string>> {
  tarballs ??= packPackages(['core', 'transport-amqp', 'otel'], path.join(work, 'packs'))
  return tarballs
}

/** A fresh npm project with the root README's quick-start install lines run in it, once. */
function quickStartApp(): Promise<void> {
  installed ??= (async () => {
    const packs = await packed()
    mkdirSync(app, { recursive: true })
    const [install] = blocks('README.md', QUICK_START, 'sh')
    for (const command of commands(install ?? '', packs)) {
      await sh('sh', ['-c', command], { cwd: app, env: npmEnv, timeout: 600_000 })
    }
  })()
  return installed
}

describe.runIf(hasRabbit)("the root README's quick start, from npm in a fresh project", () => {
  let vhost: BrokerVhost

  beforeAll(async () => {
    vhost = await BrokerVhost.create('acemq-e2e-quick-start')
    await quickStartApp()
  }, 900_000)

  afterAll(async () => {
    await vhost.delete()
  })

  it('is the same in the core README', () => {
    const root = blocks('README.md', QUICK_START, 'ts')
    expect(root).toHaveLength(1)
    expect(blocks('packages/core/README.md', '## Quick start', 'ts')).toStrictEqual(root)
    expect(blocks('packages/core/README.md', '## Quick start', 'sh')).toStrictEqual(
      blocks('README.md', QUICK_START, 'sh'),
    )
  })

  it('compiles with its own command, runs, and on SIGTERM drains the running handler, closes and exits 0', async () => {
    const [program] = blocks('README.md', QUICK_START, 'ts')
    const [, run] = blocks('README.md', QUICK_START, 'sh')
    writeFileSync(path.join(app, 'main.ts'), program ?? '')
    // `npx tsc … main.ts && node main.js`: the test compiles as written, then runs the program
    // itself so that it can signal it.
    const [compile, start] = (run ?? '').trim().split(' && ')
    expect(start).toBe('node main.js')
    await sh('sh', ['-c', compile ?? ''], { cwd: app, env: npmEnv, timeout: 300_000 })

    const queue = uniqueName('quick-start.orders')
    const child = spawn(process.execPath, ['main.js'], {
      cwd: app,
      env: { ...process.env, AMQP_URL: vhost.url, QUEUE: queue },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let output = ''
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve))
    const handling = new Promise<void>((resolve) => {
      const onData = (chunk: Buffer): void => {
        output += chunk.toString()
        if (output.includes('handling o-1')) resolve()
      }
      child.stdout.on('data', onData)
      child.stderr.on('data', onData)
    })
    const gaveUp = setTimeout(() => child.kill('SIGKILL'), 60_000)
    try {
      await Promise.race([handling, exited])
      // The handler is running (it takes a second): the signal must let it finish.
      expect(child.kill('SIGTERM'), output).toBe(true)
      expect(await exited, output).toBe(0)
    } finally {
      clearTimeout(gaveUp)
    }
    const lines = output.split('\n').filter((line) => line !== '')
    expect([...lines].sort(), output).toStrictEqual(
      ['SIGTERM: drained=true', 'handled o-1', 'handling o-1', 'running; Ctrl-C to stop'].sort(),
    )
    // The handler finished before the shutdown reported: the drain waited for it.
    expect(lines.indexOf('handling o-1')).toBeLessThan(lines.indexOf('handled o-1'))
    expect(lines.indexOf('handled o-1')).toBeLessThan(lines.indexOf('SIGTERM: drained=true'))
    // Acked before the close: nothing is left to redeliver.
    expect(await vhost.counts(queue)).toStrictEqual({ ready: 0, unacked: 0 })
  }, 120_000)
})

/**
 * A span recorded through the installed SDK: `@acemq/otel` on an in-memory connection, the
 * tracer provider from `@opentelemetry/sdk-trace-base`. Prints the span names.
 */
const OTEL_CHECK = `import { trace } from '@opentelemetry/api'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { AceMq, InMemoryTransport, Topology } from '@acemq/core'
import { instrument } from '@acemq/otel'

const exporter = new InMemorySpanExporter()
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
trace.setGlobalTracerProvider(tracerProvider)
const mq = await AceMq.connect(new InMemoryTransport())
instrument(mq)
await mq.applyTopology(Topology.define().queue('orders'))
await mq.publisher('', 'orders').send({ id: 'o-1' })
await mq.close()
console.log(exporter.getFinishedSpans().map((span) => span.name).join(','))
`

describe("@acemq/otel's install line, from npm in a fresh project", () => {
  beforeAll(async () => {
    await quickStartApp()
  }, 900_000)

  it('installs a tree npm accepts, with the API the SDK wants, and records a span through it', async () => {
    const packs = await packed()
    const [install] = blocks('packages/otel/README.md', '# @acemq/otel', 'sh')
    const [line, ...rest] = commands(install ?? '', packs)
    expect(rest).toStrictEqual([])
    expect(line).toMatch(/^npm i .*@opentelemetry\/api@~1\.9\.0 /)
    await sh('sh', ['-c', line ?? ''], { cwd: app, env: npmEnv, timeout: 600_000 })
    // `npm ls` exits non-zero on a missing or invalid peer.
    const tree = await sh('npm', ['ls', '--all', '@opentelemetry/api'], { cwd: app, env: npmEnv })
    expect(tree).toMatch(/@opentelemetry\/api@1\.9\.\d+/)
    expect(tree).not.toMatch(/@opentelemetry\/api@1\.(?!9\.)/)
    writeFileSync(path.join(app, 'otel-check.mjs'), OTEL_CHECK)
    const spans = await sh(process.execPath, ['otel-check.mjs'], { cwd: app, timeout: 60_000 })
    expect(spans.trim()).toBe('orders publish')
  }, 600_000)

  it('is refused by npm with an unpinned API: the trap the pin avoids', async () => {
    const refused = sh(
      'npm',
      ['i', '--dry-run', '@opentelemetry/api@latest', '@opentelemetry/sdk-trace-base@^2'],
      { cwd: app, env: npmEnv, timeout: 300_000 },
    )
    await expect(refused).rejects.toThrow(
      /ERESOLVE[\s\S]*peer @opentelemetry\/api@"[^"]*<1\.10\.0" from @opentelemetry\/sdk-trace-base/,
    )
  }, 300_000)
})
