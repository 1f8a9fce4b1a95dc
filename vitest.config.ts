import { defineConfig } from 'vitest/config'

// Tests run from each package's `src` through the `@acemq/source` export condition, so a
// change is tested without a build (see STYLE.md).
export default defineConfig({
  resolve: { conditions: ['@acemq/source'] },
  ssr: { resolve: { conditions: ['@acemq/source'] } },
  test: {
    include: ['packages/*/test/**/*.test.ts', 'examples/*/test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
  },
})
