import { describe, expect, it } from 'vitest'
import {
  ConfigurationError,
  ErrorCodes,
  claimCheckCodec,
  errorCodeOf,
  jsonCodec,
  bytesCodec,
  encryptedCodec,
  KeyRing,
  type ClaimCheckStore,
} from '../../src/index.js'

/** A store in a Map, recording the expiry of each put. */
function mapStore(): ClaimCheckStore & { readonly bodies: Map<string, [Uint8Array, number]> } {
  const bodies = new Map<string, [Uint8Array, number]>()
  return {
    bodies,
    put: async (key, body, expiresAt) => void bodies.set(key, [body, expiresAt]),
    get: async (key) => bodies.get(key)?.[0],
    delete: async (key) => void bodies.delete(key),
    purgeExpired: async () => 0,
  }
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  return promise.then(
    () => {
      throw new Error('expected a rejection')
    },
    (error: unknown) => error as Error,
  )
}

describe('claimCheckCodec', () => {
  it('sends a body under the threshold inline, framed ac 01 00, with the inner content type', async () => {
    const store = mapStore()
    const codec = claimCheckCodec({ inner: bytesCodec, store })
    const body = Buffer.from((await codec.encodeAsync?.(new Uint8Array(65_535))) as Uint8Array)
    expect(codec.contentType).toBe('application/octet-stream')
    expect([...body.subarray(0, 3)]).toEqual([0xac, 0x01, 0x00])
    expect(body.length).toBe(3 + 65_535)
    expect(store.bodies.size).toBe(0)
  })

  it('moves a body of 64 KiB to the store and sends ac 01 01 and the key, kept for the retention', async () => {
    const store = mapStore()
    const codec = claimCheckCodec({ inner: bytesCodec, store, retention: '2d' })
    const before = Date.now()
    const body = Buffer.from(
      (await codec.encodeAsync?.(new Uint8Array(65_536).fill(7))) as Uint8Array,
    )
    expect([...body.subarray(0, 3)]).toEqual([0xac, 0x01, 0x01])
    const key = body.toString('utf8', 3)
    const [stored, expiresAt] = store.bodies.get(key) as [Uint8Array, number]
    expect(stored.length).toBe(65_536)
    expect(expiresAt).toBeGreaterThanOrEqual(before + 2 * 86_400_000)
    expect(((await codec.decodeAsync?.(body)) as Uint8Array).length).toBe(65_536)
  })

  it('refuses a large body on the synchronous path (outbox records, pipeline hops), clearly', () => {
    const codec = claimCheckCodec({ inner: bytesCodec, store: mapStore() })
    expect(() => codec.encode(new Uint8Array(70_000))).toThrow(ConfigurationError)
    expect(() => codec.encode(new Uint8Array(70_000))).toThrow(
      /70000-byte body needs the claim-check store/,
    )
    expect([...codec.encode(new Uint8Array(1))]).toEqual([0xac, 0x01, 0x00, 0])
  })

  it('answers a body without the framing with the inner codec', async () => {
    const codec = claimCheckCodec({ inner: jsonCodec, store: mapStore() })
    expect(await codec.decodeAsync?.(Buffer.from('{"a":1}'))).toEqual({ a: 1 })
    expect(codec.decode(Buffer.from('[1]'))).toEqual([1])
  })

  it('refuses an unknown kind, an empty key and a missing body as decode failures naming what is wrong', async () => {
    const codec = claimCheckCodec({ inner: jsonCodec, store: mapStore() })
    const kind = await rejection(
      codec.decodeAsync?.(Buffer.from([0xac, 0x01, 0x07])) as Promise<unknown>,
    )
    expect(errorCodeOf(kind)).toBe(ErrorCodes.DECODE)
    expect(kind.message).toContain('kind 0x07, neither inline (0x00) nor a reference (0x01)')
    const empty = await rejection(
      codec.decodeAsync?.(Buffer.from([0xac, 0x01, 0x01])) as Promise<unknown>,
    )
    expect(empty.message).toBe('the claim-check reference has no key')
    const gone = await rejection(
      codec.decodeAsync?.(
        Buffer.concat([Buffer.from([0xac, 0x01, 0x01]), Buffer.from('k-9')]),
      ) as Promise<unknown>,
    )
    expect(errorCodeOf(gone)).toBe(ErrorCodes.DECODE)
    expect(gone.message).toContain("the claim-check key 'k-9' is not in the store")
    expect(() => codec.decode(Buffer.from([0xac, 0x01, 0x01, 0x6b]))).toThrow(
      /only an asynchronous decode/,
    )
  })

  it('reports a store that fails as a failure to retry, not a decode failure', async () => {
    const store = { ...mapStore(), get: async () => Promise.reject(new Error('disk gone')) }
    const codec = claimCheckCodec({ inner: jsonCodec, store })
    const error = await rejection(
      codec.decodeAsync?.(
        Buffer.concat([Buffer.from([0xac, 0x01, 0x01]), Buffer.from('k-1')]),
      ) as Promise<unknown>,
    )
    expect(errorCodeOf(error)).not.toBe(ErrorCodes.DECODE)
    expect(error.message).toBe("the claim-check store failed to return 'k-1': disk gone")
  })

  it('stores only ciphertext around an encrypting codec, and reads it back', async () => {
    const store = mapStore()
    const keys = KeyRing.of({ k1: new Uint8Array(32).fill(9) }, 'k1')
    const codec = claimCheckCodec({ inner: encryptedCodec({ inner: jsonCodec, keys }), store })
    const payload = { secret: 'p'.repeat(100_000) }
    const body = (await codec.encodeAsync?.(payload)) as Uint8Array
    expect(codec.contentType).toBe('application/vnd.acemq.encrypted')
    const [stored] = [...store.bodies.values()][0] as [Uint8Array, number]
    expect([...stored.subarray(0, 2)]).toEqual([0xae, 0x01])
    expect(Buffer.from(stored).includes(Buffer.from('pppppppp'))).toBe(false)
    expect(await codec.decodeAsync?.(body)).toEqual(payload)
  })

  it('refuses bad options, naming them', () => {
    expect(() => claimCheckCodec({ inner: jsonCodec, store: {} as never })).toThrow(
      /options\.store/,
    )
    expect(() => claimCheckCodec({ inner: {} as never, store: mapStore() })).toThrow(
      /options\.inner/,
    )
    expect(() => claimCheckCodec({ inner: jsonCodec, store: mapStore(), threshold: 0 })).toThrow(
      /options\.threshold/,
    )
    expect(() =>
      claimCheckCodec({ inner: jsonCodec, store: mapStore(), retention: 'soon' as never }),
    ).toThrow(/options\.retention/)
  })
})
