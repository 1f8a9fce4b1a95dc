import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { ESLint } from 'eslint'
import { describe, expect, it } from 'vitest'

// The size limit of docs/design.md §1, run through ESLint's own API with the repository's
// config on sources planted in memory at the paths they would have: nothing is written.
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const eslint = new ESLint({ cwd: root })

/** The `max-lines` errors ESLint reports for a file of `lines` lines placed at `file`. */
async function sizeErrors(file: string, lines: number, filler: string): Promise<string[]> {
  const body = Array.from({ length: lines - 1 }, (_, i) => (i === 0 ? filler : '')).join('\n')
  const [result] = await eslint.lintText(`${body}\nexport {}\n`, {
    filePath: path.join(root, file),
  })
  return (result?.messages ?? []).filter((m) => m.ruleId === 'max-lines').map((m) => m.message)
}

describe('the size limit', () => {
  it('fails a package source file of 601 lines', async () => {
    expect(await sizeErrors('packages/core/src/planted.ts', 601, '// planted')).toEqual([
      expect.stringMatching(/601.*600|600.*601/),
    ])
  })

  it('counts blank and comment lines: 601 lines of them still fail', async () => {
    expect(
      await sizeErrors('packages/store-kysely/src/planted.ts', 601, '/** planted */'),
    ).toHaveLength(1)
  })

  it('lets a package source file of 600 lines through', async () => {
    expect(await sizeErrors('packages/testing/src/planted.ts', 600, '// planted')).toEqual([])
  })

  it('leaves test files alone', async () => {
    expect(await sizeErrors('packages/core/test/planted.test.ts', 1000, '// planted')).toEqual([])
  })
})
