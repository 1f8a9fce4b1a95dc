import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AMQP_URL, DATABASE_URL, requirePostgres, requireRabbit, uniqueName } from '@acemq/testing'
import { packPackages, root, sh } from './packing.js'

const hasServices = (await requireRabbit()) && (await requirePostgres())
const template = path.join(root, 'e2e', 'packed-app')
const exampleSources = path.join(root, 'examples', 'production-service', 'src')

/** Every package, as `pnpm pack` publishes it. */
const PACKAGES = [
  'core',
  'transport-amqp',
  'store-kysely',
  'store-sqlite',
  'otel',
  'health-express',
  'health-fastify',
  'cli',
  'codec-yaml',
  'codec-toml',
  'codec-xml',
  'codec-avro',
  'codec-protobuf',
]

/** The format library each codec package takes as a peer, at the version its tests use. */
const CODEC_PEERS: readonly (readonly [string, string])[] = [
  ['codec-yaml', 'yaml'],
  ['codec-toml', 'smol-toml'],
  ['codec-xml', 'fast-xml-parser'],
  ['codec-avro', 'avsc'],
  ['codec-protobuf', 'protobufjs'],
]

/** What the application installs besides the packages: the versions this workspace tests. */
const THIRD_PARTY = {
  dependencies: {
    from: path.join(root, 'examples', 'production-service'),
    names: [
      'amqplib',
      'fastify',
      'kysely',
      'pg',
      '@opentelemetry/api',
      '@opentelemetry/context-async-hooks',
      '@opentelemetry/core',
      '@opentelemetry/sdk-metrics',
      '@opentelemetry/sdk-trace-base',
    ],
  },
  devDependencies: {
    from: root,
    names: ['typescript', '@types/node', '@types/pg', 'better-sqlite3'],
  },
}

function installedVersion(name: string, from: string): string {
  const require = createRequire(path.join(from, 'package.json'))
  // Resolved from the package's directory: some packages do not export their package.json.
  let dir = path.dirname(
    require.resolve(name === '@types/node' || name === '@types/pg' ? `${name}/package.json` : name),
  )
  for (;;) {
    try {
      const manifest = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as {
        name?: string
        version: string
      }
      if (manifest.name === name) return manifest.version
    } catch {
      // Not the package's root yet.
    }
    const parent = path.dirname(dir)
    if (parent === dir) throw new Error(`cannot find the installed version of ${name}`)
    dir = parent
  }
}

const work = mkdtempSync(path.join(tmpdir(), 'acemq-packed-app-'))

afterAll(() => {
  rmSync(work, { recursive: true, force: true })
})

let packing: Promise<Record<string, string>> | undefined

/**
 * Every package and @acemq/testing packed once for the whole file, as `file:` specs by package
 * name: both projects below install from the same tarballs, and only one build runs.
 */
function packAll(): Promise<Record<string, string>> {
  packing ??= packPackages([...PACKAGES, 'testing'], path.join(work, 'packs')).then((tarballs) =>
    Object.fromEntries(Object.entries(tarballs).map(([name, file]) => [name, `file:${file}`])),
  )
  return packing
}

/** A pnpm-workspace.yaml pointing every `@acemq/*` dependency, direct or not, at its tarball. */
function overridesYaml(tarballs: Record<string, string>): string {
  const overrides = Object.entries(tarballs)
    .map(([name, spec]) => `  '${name}': '${spec}'`)
    .join('\n')
  return `overrides:\n${overrides}\n`
}

describe('an application outside the workspace, built from the packed packages', () => {
  const app = path.join(work, 'app')

  function setType(type: 'commonjs' | 'module'): void {
    const file = path.join(app, 'package.json')
    const manifest = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>
    writeFileSync(file, `${JSON.stringify({ ...manifest, type }, null, 2)}\n`)
  }

  beforeAll(async () => {
    const tarballs = Object.fromEntries(
      Object.entries(await packAll()).filter(([name]) => name !== '@acemq/testing'),
    )

    mkdirSync(path.join(app, 'src'), { recursive: true })
    const manifest = {
      name: 'acemq-packed-app',
      private: true,
      type: 'commonjs',
      dependencies: {
        ...tarballs,
        ...Object.fromEntries(
          THIRD_PARTY.dependencies.names.map((n) => [
            n,
            installedVersion(n, THIRD_PARTY.dependencies.from),
          ]),
        ),
        ...Object.fromEntries(
          CODEC_PEERS.map(([dir, n]) => [n, installedVersion(n, path.join(root, 'packages', dir))]),
        ),
      },
      devDependencies: Object.fromEntries(
        THIRD_PARTY.devDependencies.names.map((n) => [
          n,
          installedVersion(n, THIRD_PARTY.devDependencies.from),
        ]),
      ),
    }
    writeFileSync(path.join(app, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`)
    // The packages depend on each other by version (^0.1.0): point those at the tarballs too, and
    // let better-sqlite3 build (against the local Node headers, as this repository's install does).
    writeFileSync(
      path.join(app, 'pnpm-workspace.yaml'),
      `${overridesYaml(tarballs)}allowBuilds:\n  better-sqlite3: true\n  esbuild: false\n`,
    )
    copyFileSync(path.join(root, '.pnpmfile.cjs'), path.join(app, '.pnpmfile.cjs'))
    for (const config of ['tsconfig.cjs.json', 'tsconfig.esm.json', 'tsconfig.bundler.json']) {
      copyFileSync(path.join(template, config), path.join(app, config))
    }
    for (const file of readdirSync(exampleSources)) {
      copyFileSync(path.join(exampleSources, file), path.join(app, 'src', file))
    }
    await sh('pnpm', ['install', '--no-frozen-lockfile'], { cwd: app })
  }, 900_000)

  it.each(PACKAGES)('@acemq/%s is loaded by require() from a CommonJS program', async (name) => {
    setType('commonjs')
    const out = await sh(
      process.execPath,
      [
        '-e',
        `const m = require('@acemq/${name}'); console.log(typeof m === 'object' && Object.keys(m).length > 0 ? 'loaded' : 'empty')`,
      ],
      { cwd: app, timeout: 60_000 },
    )
    expect(out.trim()).toBe('loaded')
  })

  it('compiles as CommonJS (module nodenext, "type": "commonjs"): any Kysely<DB> is accepted', async () => {
    setType('commonjs')
    await sh(
      process.execPath,
      [path.join(app, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.cjs.json'],
      {
        cwd: app,
      },
    )
  }, 300_000)

  it('compiles as an ES module (module nodenext, "type": "module")', async () => {
    setType('module')
    await sh(
      process.execPath,
      [path.join(app, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.esm.json'],
      {
        cwd: app,
      },
    )
  }, 300_000)

  it('compiles for a bundler (moduleResolution bundler)', async () => {
    setType('module')
    await sh(
      process.execPath,
      [path.join(app, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.bundler.json'],
      { cwd: app },
    )
  }, 300_000)

  describe.runIf(hasServices)('runs the production pattern', () => {
    it.each([
      ['CommonJS', 'commonjs', 'tsconfig.cjs.json', 'dist-cjs'],
      ['ES module', 'module', 'tsconfig.esm.json', 'dist-esm'],
    ] as const)(
      'built as %s',
      async (_, type, config, outDir) => {
        setType(type)
        await sh(
          process.execPath,
          [path.join(app, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', config],
          {
            cwd: app,
          },
        )
        const queue = uniqueName(`packed-app.${type}`)
        const output = await sh(process.execPath, [path.join(outDir, 'main.js')], {
          cwd: app,
          env: {
            ...process.env,
            AMQP_URL,
            DATABASE_URL,
            QUEUE: queue,
            IDEMPOTENCY_TABLE: uniqueName(`packed_${type}`).replace('.', '_'),
          },
          timeout: 120_000,
        })
        expect(output).toContain('o-1: sent twice, handled 1 time(s)')
        expect(output).toContain(`${queue}.dlq: 1 message (o-3)`)
        expect(output).toMatch(
          /^closed: telemetry \(spans: .+; acemq\.consume\.total acked=3 rejected=1 retried=1\)$/m,
        )
      },
      300_000,
    )
  })
})

/** The conformance cases `idempotencyStoreConformance` registers: its `it(` calls. */
function conformanceCases(): number {
  const suite = readFileSync(
    path.join(root, 'packages', 'testing', 'src', 'stores', 'idempotency-conformance.ts'),
    'utf8',
  )
  return suite.match(/^ {4}it\(/gm)?.length ?? 0
}

const ADAPTER_TEST = `import { InMemoryIdempotencyStore } from '@acemq/core'
import { idempotencyStoreConformance } from '@acemq/testing'

idempotencyStoreConformance('InMemoryIdempotencyStore', {
  async create({ claimTimeoutMs, retentionMs, now }) {
    const store = new InMemoryIdempotencyStore({ claimTimeout: claimTimeoutMs, retention: retentionMs, now })
    return { store, second: async () => store.share(), cleanup: async () => {} }
  },
})
`

const NODE_TEST = `import assert from 'node:assert/strict'
import net from 'node:net'
import { test } from 'node:test'
import { AceMq, ConsumerOptions, InMemoryTransport, Topology } from '@acemq/core'
import { RecordingTransport, eventually, requireService, uniqueName } from '@acemq/testing/helpers'

test('the service checks run under node:test', async () => {
  const server = net.createServer((socket) => socket.destroy())
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = 'thing://127.0.0.1:' + server.address().port
  assert.equal(await requireService('Thing', url, 1, 'thing start'), true)
  await new Promise((resolve) => server.close(resolve))
  await assert.rejects(requireService('Thing', url, 1, 'thing start'), /Thing is not reachable/)
  assert.match(uniqueName('orders'), /^orders\\./)
})

test('RecordingTransport and eventually run under node:test', async () => {
  const transport = new RecordingTransport(new InMemoryTransport())
  const mq = await AceMq.connect(transport)
  await mq.applyTopology(Topology.define().queue('orders'))
  const handled = []
  await mq.consume('orders', ConsumerOptions.defaults(), (message) => {
    handled.push(message.payload.id)
  })
  await mq.publisher('', 'orders').send({ id: 'o-1' })
  await eventually(() => transport.settlements.length === 1, 5_000, 'the ack')
  await mq.close()
  assert.deepEqual(handled, ['o-1'])
  assert.equal(transport.settlements[0].kind, 'ack')
})
`

describe('an adapter outside the workspace, tested with the packed @acemq/testing', () => {
  const adapter = path.join(work, 'adapter')

  beforeAll(async () => {
    const all = await packAll()
    const tarballs = { '@acemq/core': all['@acemq/core'], '@acemq/testing': all['@acemq/testing'] }
    mkdirSync(path.join(adapter, 'test'), { recursive: true })
    const manifest = {
      name: 'acemq-packed-adapter',
      private: true,
      type: 'module',
      devDependencies: {
        ...tarballs,
        ...Object.fromEntries(
          ['vitest', 'typescript', '@types/node'].map((n) => [n, installedVersion(n, root)]),
        ),
      },
    }
    writeFileSync(path.join(adapter, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`)
    writeFileSync(
      path.join(adapter, 'pnpm-workspace.yaml'),
      `${overridesYaml(tarballs as Record<string, string>)}allowBuilds:\n  esbuild: false\n`,
    )
    writeFileSync(
      path.join(adapter, 'tsconfig.json'),
      `${JSON.stringify({ compilerOptions: { module: 'nodenext', strict: true, noEmit: true, skipLibCheck: true, types: ['node'] }, include: ['test'] }, null, 2)}\n`,
    )
    writeFileSync(path.join(adapter, 'test', 'store.test.ts'), ADAPTER_TEST)
    writeFileSync(path.join(adapter, 'test', 'services.node-test.mjs'), NODE_TEST)
    await sh('pnpm', ['install', '--no-frozen-lockfile'], { cwd: adapter })
  }, 900_000)

  it('runs the idempotency-store conformance suite under vitest, every case passing', async () => {
    const out = await sh(
      process.execPath,
      [path.join(adapter, 'node_modules', 'vitest', 'vitest.mjs'), 'run'],
      { cwd: adapter, env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' }, timeout: 120_000 },
    )
    const cases = conformanceCases()
    expect(cases).toBeGreaterThan(20)
    expect(out).toMatch(new RegExp(`Tests\\s+${cases} passed \\(${cases}\\)`))
  }, 300_000)

  it('type-checks the adapter test against the published declarations', async () => {
    await sh(
      process.execPath,
      [path.join(adapter, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'],
      { cwd: adapter },
    )
  }, 300_000)

  it('runs the helpers under node:test, with no vitest in the import graph', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, CI: '' }
    delete env['ACEMQ_SKIP_SERVICES']
    const out = await sh(
      process.execPath,
      ['--test', path.join('test', 'services.node-test.mjs')],
      { cwd: adapter, env, timeout: 60_000 },
    )
    expect(out).toMatch(/# pass 2\n/)
    expect(out).toMatch(/# fail 0\n/)
  }, 120_000)
})
