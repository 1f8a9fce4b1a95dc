import { createHash } from 'node:crypto'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import path from 'node:path'
import { describe, expect, test } from 'vitest'
import { FIXTURES_DIR } from './fixtures.js'

const REPO_ROOT = path.dirname(FIXTURES_DIR)

// The bytes fixtures/README.md names: the family publishes them, and every AceMQ library tests
// against exactly these. A reformatted or edited copy would test something else.
const PUBLISHED: Record<string, { readonly bytes: number; readonly sha256: string }> = {
  'codec-samples.json': {
    bytes: 5_589,
    sha256: '5b30312e90d360859d1714637a4cffc9d25ef8e091c04c07303c0491ca7d793c',
  },
  'contract-fixtures.json': {
    bytes: 16_501,
    sha256: 'bef3b48f31a985a88b0f682c4d5fd06feed8ec20b1433b6c667bfc54f24b05a0',
  },
  'envelope-fixtures.json': {
    bytes: 1_328,
    sha256: 'c70c2b06a419934c40212ec08940f192f7007072a9f66b43fcf70f0592a8fbbc',
  },
}

describe('the fixture files', () => {
  test.each(Object.entries(PUBLISHED))('%s is byte for byte the published file', (name, want) => {
    const bytes = readFileSync(path.join(FIXTURES_DIR, name))
    expect(bytes.length).toBe(want.bytes)
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(want.sha256)
  })
})

/** Every text file under `dir` that the repository owns (no dependencies, builds or results). */
function* sources(dir: string): Generator<string> {
  for (const entry of readdirSync(dir)) {
    if (['node_modules', 'dist', '.turbo', 'results', 'api', 'coverage'].includes(entry)) continue
    const file = path.join(dir, entry)
    if (statSync(file).isDirectory()) yield* sources(file)
    else if (/\.(ts|js|cjs|mjs|md|json|yaml)$/.test(entry)) yield file
  }
}

describe('the repository', () => {
  const files = ['packages', 'test-support', 'e2e', 'examples', 'docs', 'bench'].flatMap((dir) => [
    ...sources(path.join(REPO_ROOT, dir)),
  ])
  // Spelled in pieces so that this file does not find itself.
  const shared = ['sha', 'red'].join('')
  const outside = new RegExp(`\\.\\./${shared}|${shared}/fixtures`)
  const citation = new RegExp(['SP', 'EC §'].join(''))

  test('reads nothing from outside itself', () => {
    expect(files.filter((file) => outside.test(readFileSync(file, 'utf8')))).toEqual([])
  })

  test('cites no document it does not hold: the contract is docs/design.md', () => {
    expect(files.filter((file) => citation.test(readFileSync(file, 'utf8')))).toEqual([])
  })
})
