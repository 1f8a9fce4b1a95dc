import { createHash, randomUUID } from 'node:crypto'
import {
  ConfigurationError,
  type ClaimResult,
  type Duration,
  type HealthContributor,
  type HealthReport,
} from '@acemq/core'
import {
  assertIdempotencyKey,
  assertOwnerToken,
  DEFAULT_CLAIM_TIMEOUT,
  DEFAULT_IDEMPOTENCY_RETENTION,
  describeError,
  functionOption,
  positiveMillis,
  type ClaimingIdempotencyStore,
} from '@acemq/core/spi'
import type { Cluster, Redis } from 'ioredis'
import { CONFIRM, RELEASE, TRY_CLAIM } from './scripts.js'

/** Where the store's keys start unless `keyPrefix` says otherwise. */
export const DEFAULT_KEY_PREFIX = 'acemq:idempotency:'

/**
 * How long Redis keeps a key after the store stops needing it. The answers come from the times
 * stored in the key, read against the store's clock; Redis's expiry only clears the key away,
 * and this margin keeps a clock that runs a little behind Redis's from losing a key early.
 */
export const EXPIRY_MARGIN = 60_000

/**
 * Options of {@link RedisIdempotencyStore}.
 *
 * @example
 * ```ts
 * const options: RedisIdempotencyStoreOptions = { keyPrefix: 'orders:seen:', retention: '2d' }
 * ```
 */
export interface RedisIdempotencyStoreOptions {
  /** What every key of this store starts with (default `acemq:idempotency:`). */
  readonly keyPrefix?: string
  /** How long a confirmed id stays a duplicate (default 1 day). */
  readonly retention?: Duration
  /** How long an unconfirmed claim lives before another caller may take it over (default 5 min). */
  readonly claimTimeout?: Duration
  /** The clock, in epoch milliseconds (default `Date.now`); every process must read the same one. For tests: it lets a test move time without sleeping. */
  readonly now?: () => number
}

/** A Lua script, sent once and then run by its SHA-1 (`EVALSHA`). */
interface Script {
  readonly source: string
  readonly sha: string
}

const script = (source: string): Script => ({
  source,
  sha: createHash('sha1').update(source).digest('hex'),
})

const SCRIPTS = {
  tryClaim: script(TRY_CLAIM),
  confirm: script(CONFIRM),
  release: script(RELEASE),
}

/**
 * An idempotency store on Redis through `ioredis`, safe across processes sharing the server:
 * each id is one hash, and every write that depends on what the hash holds is one Lua script,
 * which Redis runs without interleaving another client's commands. A confirmed id expires from
 * Redis on its own once its retention is over, so nothing needs purging. The store does not own
 * the client: quit it yourself when you are done.
 *
 * @example
 * ```ts
 * const store = new RedisIdempotencyStore(new Redis('redis://127.0.0.1:6379'))
 * ConsumerOptions.defaults().idempotent(store)
 * ```
 */
export class RedisIdempotencyStore implements ClaimingIdempotencyStore {
  /** What every key of this store starts with. */
  readonly keyPrefix: string
  /** How long a confirmed id stays a duplicate, in milliseconds. */
  readonly retention: number
  /** How long an unconfirmed claim lives before it may be taken over, in milliseconds. */
  readonly claimTimeout: number

  readonly #client: Redis | Cluster
  readonly #now: () => number
  /** The owner of the claims this instance takes without an owner token. */
  readonly #token = randomUUID()

  /**
   * The store on an `ioredis` client (a `Redis` or a `Cluster`). The options are checked here:
   * a bad value throws a `ConfigurationError` naming it.
   *
   * @example
   * ```ts
   * const store = new RedisIdempotencyStore(redis, { retention: '1d', claimTimeout: '5m' })
   * ```
   */
  constructor(client: Redis | Cluster, options: RedisIdempotencyStoreOptions = {}) {
    if (typeof (client as Partial<Redis> | null)?.evalsha !== 'function') {
      throw new ConfigurationError(
        `client must be an ioredis Redis or Cluster; got ${client === null ? 'null' : typeof client}`,
      )
    }
    if (typeof options !== 'object' || options === null) {
      throw new ConfigurationError(`options must be an object; got ${String(options)}`)
    }
    const keyPrefix = options.keyPrefix ?? DEFAULT_KEY_PREFIX
    if (typeof keyPrefix !== 'string' || keyPrefix === '') {
      throw new ConfigurationError(
        `keyPrefix must be a non-empty string; got ${JSON.stringify(keyPrefix) ?? String(keyPrefix)}`,
      )
    }
    this.#client = client
    this.keyPrefix = keyPrefix
    this.retention = positiveMillis(options.retention ?? DEFAULT_IDEMPOTENCY_RETENTION, 'retention')
    this.claimTimeout = positiveMillis(
      options.claimTimeout ?? DEFAULT_CLAIM_TIMEOUT,
      'claimTimeout',
    )
    this.#now = functionOption(options.now ?? Date.now, 'now')
  }

  /**
   * Takes the claim on `id` for `owner` (this instance's own token when omitted), or says why
   * not: a live claim is `in_progress`, a retained confirm is `duplicate`.
   *
   * @example
   * ```ts
   * if ((await store.tryClaim('order-1')) === 'claimed') await handle()
   * ```
   */
  async tryClaim(id: string, owner?: string): Promise<ClaimResult> {
    assertIdempotencyKey(id)
    assertOwnerToken(owner)
    const answer = await this.#run(SCRIPTS.tryClaim, id, [
      owner ?? this.#token,
      String(this.#now()),
      String(this.claimTimeout),
      String(this.retention),
      String(this.claimTimeout + EXPIRY_MARGIN),
    ])
    return answer as ClaimResult
  }

  /**
   * Takes the claim on `id`: true when this caller holds it now.
   *
   * @example
   * ```ts
   * if (await store.claim('order-1')) await handle()
   * ```
   */
  async claim(id: string, owner?: string): Promise<boolean> {
    return (await this.tryClaim(id, owner)) === 'claimed'
  }

  /**
   * Marks `id` handled: for the retention, every claim on it answers `duplicate`.
   *
   * @example
   * ```ts
   * await store.confirm('order-1')
   * ```
   */
  async confirm(id: string, owner?: string): Promise<void> {
    assertIdempotencyKey(id)
    assertOwnerToken(owner)
    await this.#run(SCRIPTS.confirm, id, [
      String(this.#now()),
      String(this.retention + EXPIRY_MARGIN),
    ])
  }

  /**
   * Gives up `owner`'s claim on `id` so a retry can take it; a claim another owner holds, or a
   * confirmed id, is left as it is.
   *
   * @example
   * ```ts
   * await store.release('order-1')
   * ```
   */
  async release(id: string, owner?: string): Promise<void> {
    assertIdempotencyKey(id)
    assertOwnerToken(owner)
    await this.#run(SCRIPTS.release, id, [owner ?? this.#token])
  }

  /**
   * Whether `id` was confirmed and is still retained.
   *
   * @example
   * ```ts
   * await store.isConfirmed('order-1') // true after confirm('order-1'), for the retention
   * ```
   */
  async isConfirmed(id: string): Promise<boolean> {
    assertIdempotencyKey(id)
    const confirmedAt = await this.#client.hget(this.#key(id), 'confirmedAt')
    return confirmedAt !== null && Number(confirmedAt) + this.retention >= this.#now()
  }

  /**
   * A health contributor: UP while Redis answers `PING`, DOWN with the error when it does not.
   *
   * @example
   * ```ts
   * mq.registerHealth(store.healthContributor())
   * ```
   */
  healthContributor(options: { readonly name?: string } = {}): HealthContributor {
    const name = options.name ?? 'idempotency-store'
    return {
      name,
      report: async (): Promise<HealthReport> => {
        try {
          await this.#client.ping()
          return { name, status: 'UP', details: { keyPrefix: this.keyPrefix } }
        } catch (error) {
          return { name, status: 'DOWN', details: { error: describeError(error) } }
        }
      },
    }
  }

  #key(id: string): string {
    return `${this.keyPrefix}${id}`
  }

  /** Runs a script by its SHA-1, sending it first when this server has not seen it yet. */
  async #run(script: Script, id: string, args: readonly string[]): Promise<unknown> {
    const key = this.#key(id)
    try {
      return await this.#client.evalsha(script.sha, 1, key, ...args)
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error
      return await this.#client.eval(script.source, 1, key, ...args)
    }
  }
}
