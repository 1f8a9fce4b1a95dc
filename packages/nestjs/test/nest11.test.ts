import { execFile } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'

const packageDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

// The workspace's tests run on Nest 12. `test/nest11` is a workspace package of its own that
// installs Nest 11; `run.mjs` runs this package's source in a Nest 11 application (a child
// process whose `@nestjs/*` imports resolve there) and prints what it saw.
describe('the previous Nest major (11)', () => {
  it('discovers a consumer, injects a publisher, drains on close and refuses a request-scoped consumer', async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        '--conditions=@acemq/source',
        '--import',
        'tsx',
        '--import',
        './test/nest11/register-nest11.mjs',
        'test/nest11/run.mjs',
      ],
      { cwd: packageDir, timeout: 60_000 },
    )
    const result = JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>
    expect(result.nestVersion).toMatch(/^11\./)
    expect(result.handled).toEqual(['n-1', 'n-2'])
    expect(result.drained).toBe(true)
    expect(result.refused).toMatch(
      /@Consume\('nest11\.request'\) on PerRequest\.handle: the provider is request-scoped/,
    )
  }, 90_000)
})
