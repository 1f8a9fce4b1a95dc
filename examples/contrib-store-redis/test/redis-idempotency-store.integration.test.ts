import { AceMq, ConsumerOptions, InMemoryTransport, Topology } from '@acemq/core'
import { DEFAULT_CLAIM_TIMEOUT, DEFAULT_IDEMPOTENCY_RETENTION } from '@acemq/core/spi'
import { REDIS_URL, idempotencyStoreConformance, requireRedis, uniqueName } from '@acemq/testing'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  DEFAULT_KEY_PREFIX,
  EXPIRY_MARGIN,
  RedisIdempotencyStore,
  type RedisIdempotencyStoreOptions,
} from '../src/index.js'

// Fails when Redis is down (under CI=true always; elsewhere unless ACEMQ_SKIP_SERVICES=1).
const available = await requireRedis()

/** Every key under `prefix`, deleted: each test keeps its keys under a prefix of its own. */
async function deleteKeys(redis: Redis, prefix: string): Promise<void> {
  const keys = await redis.keys(`${prefix}*`)
  if (keys.length > 0) await redis.del(...keys)
}

describe.runIf(available)('RedisIdempotencyStore', () => {
  let redis: Redis

  beforeAll(() => {
    redis = new Redis(REDIS_URL)
  })

  afterAll(async () => {
    await redis.quit()
  })

  idempotencyStoreConformance('RedisIdempotencyStore', {
    async create({ claimTimeoutMs, retentionMs, now }) {
      const keyPrefix = `${uniqueName('acemq-test')}:`
      const options: RedisIdempotencyStoreOptions = {
        keyPrefix,
        claimTimeout: claimTimeoutMs,
        retention: retentionMs,
        now,
      }
      // Each instance on its own connection, as a second process would be.
      const clients: Redis[] = []
      const open = (): RedisIdempotencyStore => {
        const client = new Redis(REDIS_URL)
        clients.push(client)
        return new RedisIdempotencyStore(client, options)
      }
      return {
        store: open(),
        async second() {
          return open()
        },
        async cleanup() {
          await deleteKeys(redis, keyPrefix)
          await Promise.all(clients.map((client) => client.quit()))
        },
      }
    },
  })

  it('uses the documented defaults', () => {
    const store = new RedisIdempotencyStore(redis)
    expect(store.keyPrefix).toBe(DEFAULT_KEY_PREFIX)
    expect(store.claimTimeout).toBe(DEFAULT_CLAIM_TIMEOUT)
    expect(store.retention).toBe(DEFAULT_IDEMPOTENCY_RETENTION)
  })

  it('refuses bad options, naming the option and the value', () => {
    const make = (options: unknown) => () =>
      new RedisIdempotencyStore(redis, options as RedisIdempotencyStoreOptions)
    expect(make({ keyPrefix: '' })).toThrow(/keyPrefix must be a non-empty string; got ""/)
    expect(make({ keyPrefix: 42 })).toThrow(/keyPrefix must be a non-empty string; got 42/)
    expect(make({ retention: 0 })).toThrow(/retention must be longer than 0 ms; got 0/)
    expect(make({ claimTimeout: 'soon' })).toThrow(/claimTimeout/)
    expect(make({ now: 5 })).toThrow(/now must be a function; got 5/)
    expect(make(null)).toThrow(/options must be an object; got null/)
    expect(() => new RedisIdempotencyStore({} as Redis)).toThrow(
      /client must be an ioredis Redis or Cluster; got object/,
    )
  })

  it('leaves nothing behind: a claim expires from Redis after the claim timeout, a confirm after the retention', async () => {
    const keyPrefix = `${uniqueName('acemq-test')}:`
    const store = new RedisIdempotencyStore(redis, {
      keyPrefix,
      claimTimeout: 10_000,
      retention: 600_000,
    })
    try {
      await store.tryClaim('claimed')
      await store.tryClaim('confirmed')
      await store.confirm('confirmed')
      const claimTtl = await redis.pttl(`${keyPrefix}claimed`)
      const confirmTtl = await redis.pttl(`${keyPrefix}confirmed`)
      expect(claimTtl).toBeGreaterThan(10_000)
      expect(claimTtl).toBeLessThanOrEqual(10_000 + EXPIRY_MARGIN)
      expect(confirmTtl).toBeGreaterThan(600_000)
      expect(confirmTtl).toBeLessThanOrEqual(600_000 + EXPIRY_MARGIN)
    } finally {
      await deleteKeys(redis, keyPrefix)
    }
  })

  it('runs its scripts again after Redis forgot them (SCRIPT FLUSH)', async () => {
    const keyPrefix = `${uniqueName('acemq-test')}:`
    // Its own server-side script cache is shared, so flush through a dedicated client: the
    // store must send the script again rather than fail with NOSCRIPT.
    const store = new RedisIdempotencyStore(redis, { keyPrefix })
    try {
      await redis.script('FLUSH')
      expect(await store.tryClaim('after-flush')).toBe('claimed')
      await store.confirm('after-flush')
      expect(await store.tryClaim('after-flush')).toBe('duplicate')
    } finally {
      await deleteKeys(redis, keyPrefix)
    }
  })

  it('reports UP while Redis answers, and DOWN with the error when it does not', async () => {
    expect(await new RedisIdempotencyStore(redis).healthContributor().report()).toEqual({
      name: 'idempotency-store',
      status: 'UP',
      details: { keyPrefix: DEFAULT_KEY_PREFIX },
    })
    const unreachable = new Redis('redis://127.0.0.1:1', {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    })
    unreachable.on('error', () => undefined)
    try {
      const report = await new RedisIdempotencyStore(unreachable)
        .healthContributor({ name: 'orders-store' })
        .report()
      expect(report).toMatchObject({ name: 'orders-store', status: 'DOWN' })
      expect(report.details['error']).toMatch(/ECONNREFUSED|Connection is closed/)
    } finally {
      unreachable.disconnect()
    }
  })

  it('lets a consumer handle a message published twice only once', async () => {
    const keyPrefix = `${uniqueName('acemq-test')}:`
    const store = new RedisIdempotencyStore(redis, { keyPrefix })
    const mq = await AceMq.connect(new InMemoryTransport())
    try {
      await mq.applyTopology(Topology.define().queue('orders'))
      const handled: string[] = []
      await mq.consume('orders', ConsumerOptions.defaults().idempotent(store), (message) => {
        handled.push((message.payload as { id: string }).id)
      })
      const publisher = mq.publisher('', 'orders')
      await publisher.send({ id: 'o-1' }, { id: 'o-1' })
      await publisher.send({ id: 'o-1' }, { id: 'o-1' })
      await publisher.send({ id: 'o-2' }, { id: 'o-2' })
      const deadline = Date.now() + 10_000
      while (!(await store.isConfirmed('o-2')) && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      await mq.close()
      expect(handled).toEqual(['o-1', 'o-2'])
      expect(await store.isConfirmed('o-1')).toBe(true)
    } finally {
      await mq.close()
      await deleteKeys(redis, keyPrefix)
    }
  })
})
