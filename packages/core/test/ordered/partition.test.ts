import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { AceMq, ConfigurationError, InMemoryTransport } from '@acemq/core'
import { MAX_PARTITIONS, partitionFor, partitionHash } from '@acemq/core/spi'

interface PartitionCase {
  readonly key: string
  readonly hash: number
  readonly partitions: number
  readonly partition: number
  readonly source: 'family' | 'python'
}

const fixtures = JSON.parse(
  readFileSync(new URL('./partition-fixtures.json', import.meta.url), 'utf8'),
) as { readonly cases: readonly PartitionCase[] }

describe('the partition of a key', () => {
  it('holds the three figures every AceMQ library is held to', () => {
    expect(fixtures.cases.filter((c) => c.source === 'family').map((c) => c.key)).toEqual([
      'acct-7',
      'same',
      '',
    ])
  })

  it.each(fixtures.cases)(
    'sends $key to partition $partition of $partitions (hash $hash)',
    ({ key, hash, partitions, partition }) => {
      expect(partitionHash(key)).toBe(hash)
      expect(partitionFor(key, partitions)).toBe(partition)
    },
  )

  it.each(fixtures.cases)(
    'sends $key to the queue of partition $partition through an ordered queue of $partitions',
    async ({ key, partitions, partition }) => {
      await using mq = await AceMq.connect(new InMemoryTransport())
      const queue = await mq
        .ordered<{ key: string }>('fixture')
        .partitions(partitions)
        .keyedBy((payload) => payload.key)
        .declare()
      expect(queue.partitionOf(key)).toBe(partition)
      await queue.send({ key })
      const transport = mq.transport as InMemoryTransport
      expect(transport.messageCount(`fixture.${partition}`)).toBe(1)
      expect(queue.queues.filter((q) => transport.messageCount(q) > 0)).toEqual([
        `fixture.${partition}`,
      ])
    },
  )

  it('is never negative and always below the count, for any key', () => {
    for (let i = 0; i < 2_000; i++) {
      const key = `k-${i}-${String.fromCodePoint(0x20 + ((i * 7919) % 0x2fff))}`
      const p = partitionFor(key, 7)
      expect(p).toBeGreaterThanOrEqual(0)
      expect(p).toBeLessThan(7)
      expect(partitionHash(key)).toBeLessThanOrEqual(0x7fffffff)
    }
  })

  it('refuses a count of 0, a fraction, more than 1024 or a key that is not a string', () => {
    expect(() => partitionFor('a', 0)).toThrow(ConfigurationError)
    expect(() => partitionFor('a', 2.5)).toThrow(/whole number from 1 to 1024; got 2.5/)
    expect(() => partitionFor('a', MAX_PARTITIONS + 1)).toThrow(/got 1025/)
    expect(() => partitionFor(7 as unknown as string, 4)).toThrow(/must be a string; got 7/)
  })
})
