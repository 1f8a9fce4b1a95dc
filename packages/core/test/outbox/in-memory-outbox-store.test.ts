import { expect, it } from 'vitest'
import { outboxStoreConformance } from '@acemq/testing'
import { InMemoryOutboxStore, OutboxRecord } from '../../src/index.js'

outboxStoreConformance('InMemoryOutboxStore', {
  transactional: false,
  async create({ maxAttempts, now }) {
    const store = new InMemoryOutboxStore({ maxAttempts, now })
    return {
      store,
      second: async () => store,
      add: (record) => store.add(record),
      addAndRollBack: undefined,
      cleanup: async () => undefined,
    }
  },
})

it('refuses a maxAttempts below 1 and anything but an OutboxRecord', async () => {
  expect(() => new InMemoryOutboxStore({ maxAttempts: 0 })).toThrow(/maxAttempts/)
  const store = new InMemoryOutboxStore()
  await expect(store.add({ id: 'x' } as unknown as OutboxRecord)).rejects.toThrow(/OutboxRecord/)
})
