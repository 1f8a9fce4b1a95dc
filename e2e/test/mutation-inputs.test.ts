import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
// @ts-expect-error -- plain JavaScript without declarations (mutation/ is run by node as it is)
import { reachedFrom, specifiersIn } from '../../mutation/dependencies.mjs'
// @ts-expect-error -- plain JavaScript without declarations
import { inputsOf, TARGETS } from '../../mutation/targets.mjs'

// `pnpm test:mutation --changed` runs a target again when any of its inputs changed; the inputs
// include every file its tests import, directly or not (docs/mutation.md, "Incremental runs").
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
type Target = { name: string }
const target = (name: string): Target => {
  const found = (TARGETS as Target[]).find((t) => t.name === name)
  if (found === undefined) throw new Error(`no mutation target ${name}`)
  return found
}
const inputs = (name: string): string[] =>
  (inputsOf(target(name), root) as string[]).map((spec) => spec.replace(/^:\(glob\)/, ''))

describe('the inputs of a mutation target', () => {
  it('reads the specifiers of import, export, side-effect and dynamic imports', () => {
    const text = [
      "import { a } from './a.js'",
      "import type { B } from '@acemq/core/spi'",
      "export { c } from '../c.js'",
      "export * from './d.js'",
      "import './e.js'",
      "const f = await import('./f.js')",
      "import {\n  g,\n  type H,\n} from './g.js'",
      "const s = 'import x from y'",
    ].join('\n')
    expect(specifiersIn(text)).toEqual([
      './a.js',
      '@acemq/core/spi',
      '../c.js',
      './d.js',
      './e.js',
      './f.js',
      './g.js',
    ])
  })

  it('include a source file the tests reach but the target does not mutate', () => {
    // core-retry mutates retry/; its tests reach the duration parser through it.
    expect(inputs('core-retry')).toContain('packages/core/src/duration.ts')
    // core-consumer's tests use the @acemq/testing kit through its package name.
    expect(inputs('core-consumer').some((file) => file.startsWith('packages/testing/src/'))).toBe(
      true,
    )
  })

  it('leave out what the tests never reach', () => {
    expect(inputs('core-retry')).not.toContain('packages/core/src/consumer/consumer.ts')
    expect(inputs('core-retry').some((file) => file.startsWith('packages/testing/'))).toBe(false)
  })

  it('follow imports through other files, and resolve a `.js` specifier to its `.ts` source', () => {
    const reached = reachedFrom(root, ['packages/core/test/retry/retry-policy.test.ts']) as string[]
    expect(reached).toContain('packages/core/src/retry/retry-policy.ts')
    expect(reached.every((file) => !file.includes('node_modules'))).toBe(true)
  })
})
