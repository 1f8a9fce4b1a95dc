import { createRequire } from 'node:module'
import path from 'node:path'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { encodePublish } from '../../src/internal/publish-frames.js'

// amqplib's own publish encoding, the reference: `Args.publish` builds the fields from the
// options as `channel.publish` does, and `Connection#sendMessage` writes the frames.
const require = createRequire(import.meta.url)
const lib = path.join(path.dirname(require.resolve('amqplib')), 'lib')
const Args = require(path.join(lib, 'api_args.js')) as {
  publish(exchange: string, routingKey: string, options: object): object
}
const { Connection } = require(path.join(lib, 'connection.js')) as {
  Connection: { prototype: { sendMessage(...args: unknown[]): boolean } }
}

const BASIC_PUBLISH = 3932200
const BASIC_PROPERTIES = 60
const CHANNEL = 3

/** The bytes amqplib queues on the channel for one publish (its chunks, concatenated). */
function amqplibFrames(exchange: string, routingKey: string, content: Buffer, options: object) {
  const chunks: Buffer[] = []
  const fields = Args.publish(exchange, routingKey, options)
  const connection = {
    channels: { [CHANNEL]: { buffer: { write: (chunk: Buffer) => chunks.push(chunk) > 0 } } },
    sentSinceLastCheck: false,
    frameMax: 131072,
    sendContent(this: unknown, ...args: unknown[]): boolean {
      return (Connection.prototype as unknown as Record<string, (...a: unknown[]) => boolean>)[
        'sendContent'
      ]!.apply(this, args)
    },
  }
  Connection.prototype.sendMessage.call(
    connection,
    CHANNEL,
    BASIC_PUBLISH,
    fields,
    BASIC_PROPERTIES,
    fields,
    content,
  )
  return { bytes: Buffer.concat(chunks), chunks: chunks.length }
}

function ours(exchange: string, routingKey: string, content: Buffer, options: object) {
  return encodePublish(CHANNEL, Args.publish(exchange, routingKey, options), content)
}

const envelopeOptions = (id: string, headers: Record<string, unknown> = {}) => ({
  persistent: true,
  mandatory: true,
  contentType: 'application/json',
  messageId: id,
  headers: {
    ...headers,
    'x-acemq-id': id,
    'x-acemq-type': 'orders.placed',
    'x-acemq-version': { '!': 'int', value: 1 },
    'x-acemq-correlation': id,
    'x-acemq-attempt': { '!': 'int', value: 1 },
    'x-acemq-first-seen': { '!': 'long', value: 1_733_300_000_123 },
    'x-acemq-origin': 'acemq@host-1',
  },
})

describe('encodePublish', () => {
  it('writes the bytes amqplib writes for an enveloped message, in one chunk', () => {
    const content = Buffer.from(JSON.stringify({ orderId: 'o-1', total: 129.97 }))
    const options = envelopeOptions('3f1c1a52-8f7e-4f7e-9d36-8d1c1f2b9a01', { 'x-tenant': 'acme' })
    const reference = amqplibFrames('', 'orders.placed', content, options)
    expect(reference.chunks).toBe(1)
    expect(ours('', 'orders.placed', content, options)).toEqual(reference.bytes)
    // The same again: the header keys now come from the kept encodings.
    expect(ours('', 'orders.placed', content, options)).toEqual(reference.bytes)
  })

  it('writes the same bytes as amqplib for every message it takes', () => {
    const ascii = fc.string({ maxLength: 40 })
    const text = fc.oneof(ascii, fc.string({ unit: 'grapheme', maxLength: 20 }))
    const headerValue = fc.oneof(
      text,
      fc.boolean(),
      fc.integer({ min: -(2 ** 40), max: 2 ** 40 }),
      fc.constantFrom(0, -1, 127, 128, -128, -129, 32767, 32768, -32768, -32769),
      fc.constantFrom(2 ** 31 - 1, 2 ** 31, -(2 ** 31), -(2 ** 31) - 1, Number.MAX_SAFE_INTEGER),
      fc.constantFrom(Number.MIN_SAFE_INTEGER, -(2 ** 32), 2 ** 32),
      fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }).map((value) => ({ '!': 'int', value })),
      fc.integer({ min: -(2 ** 52), max: 2 ** 52 }).map((value) => ({ '!': 'long', value })),
      fc.constant(undefined),
    )
    const shortString = fc.option(text, { nil: undefined })
    let taken = 0
    fc.assert(
      fc.property(
        fc.record({
          exchange: ascii,
          routingKey: text,
          body: fc.uint8Array({ maxLength: 600 }),
          headers: fc.option(fc.dictionary(text, headerValue, { maxKeys: 8 }), {
            nil: undefined,
          }),
          contentType: shortString,
          contentEncoding: shortString,
          messageId: shortString,
          correlationId: shortString,
          replyTo: shortString,
          expiration: fc.option(fc.integer({ min: 0, max: 10 ** 9 }), { nil: undefined }),
          type: shortString,
          appId: shortString,
          userId: shortString,
          priority: fc.option(fc.integer({ min: 0, max: 255 }), { nil: undefined }),
          persistent: fc.option(fc.boolean(), { nil: undefined }),
          mandatory: fc.option(fc.boolean(), { nil: undefined }),
        }),
        ({ exchange, routingKey, body, ...options }) => {
          const content = Buffer.from(body)
          const reference = amqplibFrames(exchange, routingKey, content, options)
          const encoded = ours(exchange, routingKey, content, options)
          // It leaves a message to amqplib only when amqplib would split it into chunks.
          if (encoded === undefined) expect(reference.chunks).toBeGreaterThan(1)
          else {
            taken++
            expect(encoded).toEqual(reference.bytes)
          }
        },
      ),
      { numRuns: 500 },
    )
    // Most of them are small enough to be taken (the check above is not idle).
    expect(taken).toBeGreaterThan(250)
  })

  it('leaves to amqplib what it does not encode itself', () => {
    const content = Buffer.from('{}')
    const leaves = (options: object): void => {
      expect(ours('', 'q', content, options)).toBeUndefined()
    }
    leaves({ headers: { nested: { a: 1 } } })
    leaves({ headers: { list: [1, 2] } })
    leaves({ headers: { bytes: Buffer.from('x') } })
    leaves({ headers: { nothing: null } })
    leaves({ headers: { fraction: 1.5 } })
    leaves({ headers: { huge: 2 ** 60 } })
    leaves({ headers: { when: { '!': 'timestamp', value: 1 } } })
    leaves({ headers: { wide: { '!': 'int', value: 2 ** 31 } } })
    leaves({ headers: { [`k${'x'.repeat(255)}`]: 'a key longer than 255 bytes' } })
    leaves({ CC: 'other' })
    leaves({ timestamp: 1_733_300_000 })
    leaves({ contentType: 'x'.repeat(256) })
    leaves({ messageId: 42 })
    leaves({ deliveryMode: 1.5 })
    leaves({ priority: 256 })
    leaves({ headers: { big: 'x'.repeat(20_000) } })
    expect(encodePublish(CHANNEL, Args.publish('x'.repeat(256), 'q', {}), content)).toBeUndefined()
    // A large message goes to amqplib, which splits it into chunks.
    expect(ours('', 'q', Buffer.alloc(4_000), {})).toBeUndefined()
  })
})
