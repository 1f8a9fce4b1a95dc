import { execFile } from 'node:child_process'
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
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  AMQP_URL,
  DATABASE_URL,
  requirePostgres,
  requireRabbit,
  uniqueName,
} from '../../test-support/services.js'

const run = promisify(execFile)
const hasServices = (await requireRabbit()) && (await requirePostgres())
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
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

/** Runs a command; on failure, the error carries its output. */
async function sh(
  command: string,
  args: readonly string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv; timeout?: number },
): Promise<string> {
  try {
    const { stdout, stderr } = await run(command, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      timeout: options.timeout ?? 600_000,
      maxBuffer: 64 * 1024 * 1024,
    })
    return `${stdout}${stderr}`
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string }
    throw new Error(
      `${command} ${args.join(' ')} failed in ${options.cwd}:\n${stdout ?? ''}${stderr ?? ''}`,
      {
        cause: error,
      },
    )
  }
}

describe('an application outside the workspace, built from the packed packages', () => {
  const work = mkdtempSync(path.join(tmpdir(), 'acemq-packed-app-'))
  const packs = path.join(work, 'packs')
  const app = path.join(work, 'app')

  function setType(type: 'commonjs' | 'module'): void {
    const file = path.join(app, 'package.json')
    const manifest = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>
    writeFileSync(file, `${JSON.stringify({ ...manifest, type }, null, 2)}\n`)
  }

  beforeAll(async () => {
    // The tarballs hold dist/: build first (turbo answers from its cache when nothing changed).
    await sh('pnpm', ['build'], { cwd: root })
    mkdirSync(packs)
    const tarballs: Record<string, string> = {}
    for (const name of PACKAGES) {
      const before = new Set(readdirSync(packs))
      await sh('pnpm', ['pack', '--pack-destination', packs], {
        cwd: path.join(root, 'packages', name),
      })
      const [tarball] = readdirSync(packs).filter((file) => !before.has(file))
      if (tarball === undefined) throw new Error(`pnpm pack made no tarball for ${name}`)
      tarballs[`@acemq/${name}`] = `file:${path.join(packs, tarball)}`
    }

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
    const overrides = Object.entries(tarballs)
      .map(([name, spec]) => `  '${name}': '${spec}'`)
      .join('\n')
    writeFileSync(
      path.join(app, 'pnpm-workspace.yaml'),
      `overrides:\n${overrides}\nallowBuilds:\n  better-sqlite3: true\n  esbuild: false\n`,
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

  afterAll(() => {
    rmSync(work, { recursive: true, force: true })
  })

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
