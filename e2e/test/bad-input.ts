/**
 * Hostile raw messages for the bad-input test, and what the consumer of
 * `src/bad-input-worker.ts` must make of each: handled, parked or dead-lettered.
 *
 * Every message carries `x-test-seq` (its number, an ordinary application header carried on
 * every copy) and a few `x-acemq-*` headers of a wrong type. Which one it ends in depends only
 * on its content type and body — the envelope headers must never change the outcome:
 * - no codec for the content type, or a body its codec cannot decode → parked
 *   (`could not decode: ...`);
 * - text or bytes (decoded, but not an order), a JSON value that is not an object, or an
 *   object the handler refuses → dead-lettered (the handler's `FatalError`);
 * - `{ "kind": "fail" }` → retried until the policy gives up → dead-lettered (`gave up ...`);
 * - `{ "kind": "ok" }` → handled once.
 */
import type { Options } from 'amqplib'
import { type Headers } from '@acemq/core'
import { readEnvelope } from '@acemq/core/spi'

export type Outcome = 'handled' | 'parked' | 'dead-lettered'

export interface BadMessage {
  readonly seq: number
  readonly body: Buffer
  readonly options: Options.Publish
  readonly expected: Outcome
  /** What the reason of a parked or dead-lettered copy must look like. */
  readonly reason: RegExp | undefined
  /** The body category, for the accounting. */
  readonly bodyKind: string
  /** The content type category, for the accounting. */
  readonly contentType: string
}

/** The envelope headers, in the case docs/design.md §4 writes them and in one it does not. */
const ENVELOPE_HEADERS = [
  'x-acemq-id',
  'x-acemq-type',
  'x-acemq-version',
  'x-acemq-correlation',
  'x-acemq-causation',
  'x-acemq-attempt',
  'x-acemq-first-seen',
  'x-acemq-origin',
  'x-acemq-error',
  'x-acemq-claim',
  'x-acemq-unknown',
  'X-AceMQ-Attempt',
]

/** Header values of every wrong type, for every envelope header but the id. */
function hostileValues(seq: number): unknown[] {
  const deep: Record<string, unknown> = { leaf: seq }
  let nested: Record<string, unknown> = deep
  for (let i = 0; i < 20; i++) nested = { [`level${i}`]: nested, list: [i, [i, { i }]] }
  return [
    // strings
    `text-${seq}`,
    '',
    ' ',
    `  ${seq}  `,
    '1.5',
    '-3',
    '0',
    '99999999999999999999999',
    `é😀-${seq}`,
    'x'.repeat(200),
    'null',
    '{"a":1}',
    `nul\u0000${seq}`,
    // floats
    1.5,
    -0.25,
    3.141592653589793,
    1e300,
    -1e-300,
    { '!': 'float', value: 2.5 },
    { '!': 'double', value: 7 },
    // negatives
    -1,
    -seq,
    -2147483648,
    { '!': 'int', value: -5 },
    { '!': 'long', value: -(2 ** 40) },
    { '!': 'byte', value: -1 },
    { '!': 'short', value: -300 },
    // huge numbers
    2 ** 31,
    { '!': 'long', value: '9223372036854775807' },
    { '!': 'long', value: '-9223372036854775808' },
    { '!': 'long', value: 2 ** 53 + 2 },
    { '!': 'unsignedint', value: 4294967295 },
    { '!': 'timestamp', value: 2 ** 40 },
    { '!': 'timestamp', value: 1 },
    { '!': 'decimal', value: { places: 2, digits: 12345 } },
    { '!': 'decimal', value: { places: 0, digits: 7 } },
    1_000_000_000 + seq,
    // tables, arrays, booleans, bytes, null, nested
    {},
    { a: 1 },
    { value: 1 },
    { '!x': 'int', value: 3 },
    nested,
    [],
    [1, 2, 3],
    [`a-${seq}`],
    [[1]],
    [null],
    true,
    false,
    Buffer.from([0xff, 0xfe, 0xfd]),
    Buffer.alloc(0),
    Buffer.from(`bytes-${seq}`),
    null,
  ]
}

/**
 * Values of every wrong type for `x-acemq-id`. Those an id can be read from (whole numbers,
 * non-empty text, UTF-8 bytes) include `seq`, so that no two messages share an idempotency key
 * and "handled" is exact; the rest fall back to the message id (or a new one). Left out on
 * purpose, because each is a bug with a test of its own: an id over 255 bytes and an id with NUL.
 */
function hostileIds(seq: number): unknown[] {
  return [
    `text-${seq}`,
    '',
    `  ${seq}  `,
    `1.5-${seq}`,
    `é😀-${seq}`,
    `${'x'.repeat(200)}-${seq}`,
    1.5,
    -0.25,
    1e300,
    { '!': 'float', value: 2.5 },
    { '!': 'double', value: 7.5 },
    -seq,
    { '!': 'int', value: -1_000_000 - seq },
    { '!': 'long', value: -(2 ** 40) - seq },
    { '!': 'long', value: '9223372036854775807' },
    { '!': 'long', value: 2 ** 53 + 2 },
    1_000_000_000 + seq,
    { '!': 'unsignedint', value: 3_000_000_000 + seq },
    { '!': 'timestamp', value: 2 ** 40 + seq },
    { '!': 'decimal', value: { places: 2, digits: 12345 } },
    {},
    { a: 1 },
    { '!x': 'int', value: seq },
    [],
    [1, 2, 3],
    [`a-${seq}`],
    true,
    false,
    Buffer.from([0xff, 0xfe, 0xfd]),
    Buffer.alloc(0),
    Buffer.from(`bytes-${seq}`),
    null,
  ]
}

function valuesFor(header: string, seq: number): unknown[] {
  return header === 'x-acemq-id' ? hostileIds(seq) : hostileValues(seq)
}

/** A small, seeded generator, so that every run sends the same messages. */
function mulberry32(seed: number): () => number {
  let a = seed
  return () => {
    a = (a + 0x6d2b79f5) | 0
    let t = Math.imul(a ^ (a >>> 15), 1 | a)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const LARGE = 1024 * 1024

interface BodyKind {
  readonly name: string
  body(seq: number, random: () => number): Buffer
  /** Weight out of the sum of weights. */
  readonly weight: number
}

const BODIES: readonly BodyKind[] = [
  { name: 'json ok', weight: 30, body: (seq) => Buffer.from(JSON.stringify({ kind: 'ok', seq })) },
  {
    name: 'json fail',
    weight: 8,
    body: (seq) => Buffer.from(JSON.stringify({ kind: 'fail', seq })),
  },
  {
    name: 'json other kind',
    weight: 4,
    body: (seq) => Buffer.from(JSON.stringify({ kind: 'what', seq })),
  },
  {
    name: 'json not an object',
    weight: 8,
    body: (seq) => Buffer.from(['null', '42', '"text"', '[1,2]', 'true', `-${seq}`][seq % 6] ?? ''),
  },
  {
    name: 'invalid json',
    weight: 15,
    body: (seq) =>
      Buffer.from(
        ['{', '{"kind":', 'undefined', "{'kind':'ok'}", '{"kind":"ok"}}', 'NaN', `ok-${seq}`][
          seq % 7
        ] ?? '',
      ),
  },
  {
    name: 'binary',
    weight: 15,
    body: (_seq, random) =>
      Buffer.from([0xff, 0xfe, ...Array.from({ length: 62 }, () => Math.floor(random() * 256))]),
  },
  { name: 'empty', weight: 10, body: () => Buffer.alloc(0) },
]

const LARGE_BODIES: readonly BodyKind[] = [
  {
    name: 'large json ok (1 MB)',
    weight: 0,
    body: (seq) => {
      const head = JSON.stringify({ kind: 'ok', seq, pad: '' })
      return Buffer.from(head.replace('"pad":""', `"pad":"${'x'.repeat(LARGE - head.length)}"`))
    },
  },
  { name: 'large invalid (1 MB)', weight: 0, body: () => Buffer.alloc(LARGE, 0x7b) },
  {
    name: 'large binary (1 MB)',
    weight: 0,
    body: (_seq, random) =>
      Buffer.from(Array.from({ length: LARGE }, () => Math.floor(random() * 256))),
  },
]

const CONTENT_TYPES: readonly (string | undefined)[] = [
  undefined,
  undefined,
  'application/json',
  'application/json',
  'application/json; charset=utf-8',
  'APPLICATION/JSON',
  'application/vnd.acme.order+json',
  'text/plain',
  'text/plain; charset=utf-8',
  'application/octet-stream',
  'application/xml',
  'made/up',
  'application/jsonx',
  'json',
]

const utf8 = new TextDecoder('utf-8', { fatal: true })

/** What the engine must do with a body of `contentType` (docs/design.md §6: decode, then the handler). */
export function expectedOutcome(
  contentType: string | undefined,
  body: Buffer,
): { outcome: Outcome; reason: RegExp | undefined } {
  const media = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? ''
  const parked = { outcome: 'parked' as const, reason: /^could not decode: ./ }
  const refused = { outcome: 'dead-lettered' as const, reason: /^not an order: / }
  const json =
    media === '' || media === 'application/json' || /^application\/[^/\s]+\+json$/.test(media)
  if (media === 'application/octet-stream') return refused
  if (!json && media !== 'text/plain') return parked
  let text: string
  try {
    text = utf8.decode(body)
  } catch {
    return parked
  }
  if (media === 'text/plain') return refused
  if (body.length === 0) return parked
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return parked
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return refused
  const kind = (value as { kind?: unknown }).kind
  if (kind === 'ok') return { outcome: 'handled', reason: undefined }
  if (kind === 'fail') {
    return {
      outcome: 'dead-lettered',
      reason: GAVE_UP,
    }
  }
  return refused
}

/** Stands for "given up on": the exact reason depends on the headers (see giveUpReason). */
const GAVE_UP = /^gave up /

/**
 * The exact reason a `{ "kind": "fail" }` message is dead-lettered with by the worker's
 * `RetryPolicy.fixed(3, 10).giveUpAfter('1h')`, told from the headers it is published with, as
 * the consumer reads them: an attempt header of 3 or more gives up at once on attempts; a
 * plausible first-seen over an hour ago gives up on age (every such value here is years old);
 * anything else is retried until the third attempt. A consumer that mistook the age (or the
 * attempt) would give the other reason, and fail the test.
 */
function giveUpReason(headers: Record<string, unknown>): RegExp {
  const { envelope } = readEnvelope(headers as Headers, { routingKey: 'bad-input' })
  const why =
    envelope.attempt >= 3
      ? `gave up after ${envelope.attempt} attempt(s)`
      : envelope.firstSeen !== undefined && Date.now() - envelope.firstSeen >= 3_600_000
        ? 'gave up on a message older than 1h'
        : 'gave up after 3 attempt(s)'
  return new RegExp(`^${why.replace(/[()]/g, '\\$&')}: asked to fail$`)
}

/** `count` hostile messages, the same every run. */
export function badMessages(count: number): BadMessage[] {
  const random = mulberry32(20_261_202)
  const weights = BODIES.reduce((sum, kind) => sum + kind.weight, 0)
  const messages: BadMessage[] = []
  for (let seq = 1; seq <= count; seq++) {
    let kind: BodyKind
    if (seq % 1000 === 7) kind = LARGE_BODIES[0] as BodyKind
    else if (seq % 1000 === 507) kind = LARGE_BODIES[1] as BodyKind
    else if (seq % 1000 === 707) kind = LARGE_BODIES[2] as BodyKind
    else {
      let pick = random() * weights
      kind = BODIES.find((k) => (pick -= k.weight) < 0) ?? (BODIES[0] as BodyKind)
    }
    const body = kind.body(seq, random)
    const contentType = CONTENT_TYPES[Math.floor(random() * CONTENT_TYPES.length)]
    // Every (header, value) pair appears: the header by seq, the value by the round, plus one
    // or two more chosen at random.
    const first = ENVELOPE_HEADERS[seq % ENVELOPE_HEADERS.length] as string
    const firstValues = valuesFor(first, seq)
    const headers: Record<string, unknown> = {
      [first]: firstValues[Math.floor(seq / ENVELOPE_HEADERS.length) % firstValues.length],
    }
    for (let extra = Math.floor(random() * 3); extra > 0; extra--) {
      const name = ENVELOPE_HEADERS[Math.floor(random() * ENVELOPE_HEADERS.length)] as string
      const values = valuesFor(name, seq)
      headers[name] ??= values[Math.floor(random() * values.length)]
    }
    headers['x-test-seq'] = seq
    const options: Options.Publish = {
      headers,
      persistent: true,
      // Most carry a message id to fall back on; the rest get a new one from the consumer.
      ...(seq % 3 !== 0 && { messageId: `bad-${seq}` }),
      ...(contentType !== undefined && { contentType }),
    }
    const expected = expectedOutcome(contentType, body)
    const { outcome } = expected
    const reason = expected.reason === GAVE_UP ? giveUpReason(headers) : expected.reason
    messages.push({
      seq,
      body,
      options,
      expected: outcome,
      reason,
      bodyKind: kind.name,
      contentType: contentType ?? '(none)',
    })
  }
  return messages
}
