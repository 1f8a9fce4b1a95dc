import { ConfigurationError } from '../errors.js'

/** An AES-256 key is 32 bytes. */
export const KEY_LENGTH = 32
const MAX_KEY_ID_BYTES = 255

function assertKeyId(id: unknown, name: string): asserts id is string {
  if (typeof id !== 'string' || id === '' || Buffer.byteLength(id) > MAX_KEY_ID_BYTES) {
    throw new ConfigurationError(
      `${name} must be a key id of 1 to ${MAX_KEY_ID_BYTES} UTF-8 bytes; got ${JSON.stringify(id)}`,
    )
  }
}

function keyOf(id: string, key: unknown): Buffer {
  // Never print the key: only its id and its length.
  if (!(key instanceof Uint8Array) || key.length !== KEY_LENGTH) {
    const length = key instanceof Uint8Array ? `${key.length} byte(s)` : typeof key
    throw new ConfigurationError(
      `KeyRing key '${id}' must be ${KEY_LENGTH} bytes (AES-256); got ${length}`,
    )
  }
  return Buffer.from(key)
}

/**
 * The keys an {@link encryptedCodec} encrypts and decrypts with: it encrypts with the current
 * key and decrypts with any key in the ring, so keys rotate without a stop — add the new key,
 * make it current everywhere, and drop the old one once no message under it can still be read.
 * Immutable. Keys never leave it: its JSON and its inspection show the ids only, and no error
 * names a key, only its id.
 *
 * @example
 * ```ts
 * const ring = KeyRing.of({ '2026-01': keyA, '2026-06': keyB }, '2026-06')
 * ring.currentId // '2026-06'
 * ```
 */
export class KeyRing {
  readonly #keys: ReadonlyMap<string, Buffer>
  /** The id of the key new messages are encrypted with; undefined for a ring that only decrypts. */
  readonly currentId: string | undefined

  private constructor(keys: ReadonlyMap<string, Buffer>, currentId: string | undefined) {
    this.#keys = keys
    this.currentId = currentId
    Object.freeze(this)
  }

  /**
   * A ring of `keys` (id → 32 bytes) encrypting with `current`. Without `current` the ring only
   * decrypts: publishing through it is refused, naming the ring's ids. Throws a
   * {@link ConfigurationError} for no keys, an id that is not 1 to 255 UTF-8 bytes, a key that
   * is not 32 bytes, or a current id that is not in the ring.
   */
  static of(keys: Readonly<Record<string, Uint8Array>>, current?: string): KeyRing {
    if (typeof keys !== 'object' || keys === null) {
      throw new ConfigurationError(
        `KeyRing.of(keys) must be an object of key id → key; got ${String(keys)}`,
      )
    }
    const map = new Map<string, Buffer>()
    for (const [id, key] of Object.entries(keys)) {
      assertKeyId(id, 'KeyRing.of(keys): each id')
      map.set(id, keyOf(id, key))
    }
    if (map.size === 0) {
      throw new ConfigurationError('KeyRing.of(keys) must hold at least one key; got none')
    }
    if (current !== undefined && !map.has(current)) {
      throw new ConfigurationError(
        `KeyRing.of(current) must be one of the ring's ids (${[...map.keys()].join(', ')}); got ${JSON.stringify(current)}`,
      )
    }
    return new KeyRing(map, current)
  }

  /** The ids in the ring. */
  get ids(): readonly string[] {
    return [...this.#keys.keys()]
  }

  /** A new ring with `key` added under `id` (replacing a key of that id), and current if `makeCurrent`. */
  with(id: string, key: Uint8Array, makeCurrent = false): KeyRing {
    assertKeyId(id, 'KeyRing.with(id)')
    const keys = new Map(this.#keys)
    keys.set(id, keyOf(id, key))
    return new KeyRing(keys, makeCurrent ? id : this.currentId)
  }

  /** A new ring without `id`; removing the current key leaves a ring that only decrypts. */
  without(id: string): KeyRing {
    const keys = new Map(this.#keys)
    keys.delete(id)
    if (keys.size === 0) {
      throw new ConfigurationError(`KeyRing.without('${id}') would leave the ring empty`)
    }
    return new KeyRing(keys, this.currentId === id ? undefined : this.currentId)
  }

  /**
   * The key under `id`, for a codec that encrypts with the ring; undefined when the ring does
   * not hold it. The only way a key leaves the ring: never print what it answers.
   */
  keyFor(id: string): Buffer | undefined {
    return this.#keys.get(id)
  }

  toJSON(): { readonly currentId: string | undefined; readonly ids: readonly string[] } {
    return { currentId: this.currentId, ids: this.ids }
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return `KeyRing { currentId: ${JSON.stringify(this.currentId)}, ids: ${JSON.stringify(this.ids)} }`
  }
}
