import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'

// The Vitest configuration of the mutation run (see mutation/stryker.config.mjs). Stryker runs
// it in a sandbox, a copy of the repository: every `@acemq/*` import is pointed at that copy's
// `src`, because the workspace links under node_modules lead back to the unmutated originals
// (a test importing `@acemq/core` would otherwise never see a mutant).
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

/** A package's entry points by import name: `@acemq/core`, `@acemq/core/spi`, … (their source). */
const alias = readdirSync(path.join(root, 'packages')).flatMap((dir) => {
  const manifest = path.join(root, 'packages', dir, 'package.json')
  let parsed: { name: string; exports?: Record<string, unknown> }
  try {
    parsed = JSON.parse(readFileSync(manifest, 'utf8')) as typeof parsed
  } catch {
    return []
  }
  const entries = Object.entries(parsed.exports ?? { '.': { '@acemq/source': './src/index.ts' } })
  return entries.flatMap(([subpath, target]) => {
    const source =
      typeof target === 'object' && target !== null
        ? (target as Record<string, unknown>)['@acemq/source']
        : undefined
    if (typeof source !== 'string') return []
    const name = subpath === '.' ? parsed.name : `${parsed.name}/${subpath.slice(2)}`
    return [
      {
        find: new RegExp(`^${name.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}$`),
        replacement: path.join(root, 'packages', dir, source),
      },
    ]
  })
})

const conditions = ['@acemq/source']

export default defineConfig({
  root,
  resolve: { conditions, alias },
  ssr: { resolve: { conditions } },
  test: {
    name: 'mutation',
    // The target's tests (mutation/targets.mjs), set by mutation/stryker.config.mjs.
    include: JSON.parse(process.env['ACEMQ_MUTATION_TESTS'] ?? '["packages/*/test/**/*.test.ts"]'),
    exclude: ['**/node_modules/**', '**/*.disruptive.test.ts'],
    // Skips the tests the target leaves out by name (mutation/targets.mjs, `leaveOut`).
    setupFiles: [path.join(root, 'mutation', 'leave-out.ts')],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
})
