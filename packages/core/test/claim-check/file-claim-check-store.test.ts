import { mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { expect, it } from 'vitest'
import { claimCheckStoreConformance } from '@acemq/testing'
import { ConfigurationError, FileClaimCheckStore } from '../../src/index.js'

claimCheckStoreConformance('FileClaimCheckStore', {
  async create() {
    const directory = await mkdtemp(path.join(tmpdir(), 'acemq-claims-'))
    return {
      store: new FileClaimCheckStore(directory),
      second: async () => new FileClaimCheckStore(directory),
      cleanup: () => rm(directory, { recursive: true, force: true }),
    }
  },
})

it('refuses a directory that is not a path', () => {
  expect(() => new FileClaimCheckStore('')).toThrow(ConfigurationError)
})

it('leaves no temporary file behind after a put', async () => {
  const directory = await mkdtemp(path.join(tmpdir(), 'acemq-claims-'))
  try {
    await new FileClaimCheckStore(directory).put('k-1', Buffer.from('x'), Date.now() + 1_000)
    expect(await readdir(directory)).toEqual(['k-1.body'])
  } finally {
    await rm(directory, { recursive: true, force: true })
  }
})
