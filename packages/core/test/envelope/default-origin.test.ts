import { expect, it, vi } from 'vitest'
import { defaultOrigin } from '../../src/envelope/envelope.js'

// A host that reports no name (some containers do) still gets an origin with a host part.
vi.mock('node:os', async (importOriginal) => ({
  ...(await importOriginal<typeof import('node:os')>()),
  hostname: () => '',
}))

it('names the origin acemq@localhost on a host without a name', () => {
  expect(defaultOrigin()).toBe('acemq@localhost')
})
