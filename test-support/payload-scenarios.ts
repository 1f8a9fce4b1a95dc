import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { inspect } from 'node:util'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { type } from 'arktype'
import * as v from 'valibot'
import { z } from 'zod'
import {
  CodecRegistry,
  ConsumerOptions,
  FatalError,
  FileClaimCheckStore,
  claimCheckCodec,
  type ClaimCheckStore,
  ENCRYPTED_CONTENT_TYPE,
  ErrorCodes,
  KeyRing,
  encryptedCodec,
  jsonCodec,
  RetryPolicy,
  Topology,
  errorCodeOf,
  withSchema,
  type AceMq,
  type Consumer,
  type Handler,
  type StandardSchemaV1,
} from '@acemq/core'
import { readEnvelope, type ConsumeOutcome } from '@acemq/core/spi'
import {
  closeScenario,
  eventually,
  openScenario,
  uniqueName,
  type BrokerProbe,
  type InspectedMessage,
  type ScenarioConnection,
  type ScenarioTarget,
} from '@acemq/testing'

/** One order, as each schema library spells it: `total` arrives as a string and leaves a number. */
const ORDER_SCHEMAS: readonly (readonly [string, StandardSchemaV1<unknown, Order>])[] = [
  ['zod', z.object({ id: z.string(), total: z.coerce.number().positive() })],
  [
    'valibot',
    v.object({
      id: v.string(),
      total: v.pipe(v.unknown(), v.transform(Number), v.number(), v.minValue(0.01)),
    }),
  ],
  [
    'arktype',
    type({
      id: 'string',
      total: type('string.numeric.parse')
        .or('number')
        .pipe((n) => n)
        .narrow((n) => n > 0),
    }),
  ],
]

interface Order {
  readonly id: string
  readonly total: number
}

/** Consumes `q` with default options, collecting each payload. */
async function collectPayloads(mq: AceMq, q: string, consumers: Consumer[]): Promise<unknown[]> {
  const seen: unknown[] = []
  consumers.push(
    await mq.consume(q, ConsumerOptions.defaults(), (message) => void seen.push(message.payload)),
  )
  return seen
}

/** Records how each delivery ended, as telemetry sees it. */
function recordOutcomes(mq: AceMq): ConsumeOutcome[] {
  const outcomes: ConsumeOutcome[] = []
  mq.setInstrumentation({
    publishStarted: () => undefined,
    processStarted: () => ({
      run: (fn) => fn(),
      handled: () => undefined,
      retried: () => undefined,
      setAside: () => undefined,
      end: (outcome) => void outcomes.push(outcome),
    }),
  })
  return outcomes
}

/**
 * Schema validation (docs/design.md §26) on one transport: a consumer typed from a Standard
 * Schema of zod, valibot and arktype, and a publisher that refuses what its schema refuses.
 */
export function schemaScenarios(name: string, target: ScenarioTarget): void {
  describe(`schema validation on ${name}`, () => {
    let connection: ScenarioConnection
    let mq: AceMq
    let probe: BrokerProbe
    const queues: string[] = []
    const consumers: Consumer[] = []

    beforeEach(async () => {
      connection = await openScenario(target)
      ;({ mq, probe } = connection)
    })
    afterEach(async () => {
      for (const consumer of consumers.splice(0)) await consumer.close({ drainTimeout: 0 })
      await closeScenario(connection, queues)
    })

    async function queue(): Promise<string> {
      const q = uniqueName('schema')
      queues.push(q)
      await mq.applyTopology(Topology.define().queueWithDeadLetter(q))
      return q
    }

    async function consume(q: string, handler: Handler<unknown>): Promise<void> {
      const options = ConsumerOptions.defaults().withRetry(RetryPolicy.fixed(5, 10))
      consumers.push(await mq.consume(q, options, handler))
    }

    async function dlqCopy(q: string): Promise<InspectedMessage> {
      await eventually(async () => (await probe.count(`${q}.dlq`)) === 1, 10_000, 'the dlq copy')
      return (await probe.get(`${q}.dlq`)) as InspectedMessage
    }

    for (const [library, Order] of ORDER_SCHEMAS) {
      it(`hands a ${library}-typed handler the schema's output for a valid message`, async () => {
        const q = await queue()
        const seen: Order[] = []
        await consume(
          q,
          withSchema(Order, (message) => {
            // Typed from the schema: `total` is a number here.
            const total: number = message.payload.total
            seen.push({ id: message.payload.id, total })
          }),
        )
        await mq.publisher('', q).send({ id: 'o-1', total: '12.5' })
        await eventually(() => seen.length === 1, 10_000, 'the handled order')
        expect(seen).toEqual([{ id: 'o-1', total: 12.5 }])
      })

      it(`dead-letters a message ${library} refuses at once, with the issues as the reason and outcome invalid`, async () => {
        const q = await queue()
        const outcomes = recordOutcomes(mq)
        let ran = 0
        await consume(
          q,
          withSchema(Order, () => {
            ran += 1
          }),
        )
        await mq.publisher('', q).send({ total: '-3' })
        const copy = await dlqCopy(q)
        const { envelope } = readEnvelope(copy.headers, {
          messageId: copy.messageId,
          routingKey: q,
        })
        expect(ran).toBe(0)
        expect(envelope.attempt).toBe(1)
        expect(envelope.error).toMatch(/^invalid payload \(\d+ issue\(s\)\): /)
        expect(envelope.error).toMatch(/\bid: /)
        expect(envelope.error).toMatch(/\btotal: /)
        expect(JSON.parse(Buffer.from(copy.body).toString())).toEqual({ total: '-3' })
        await eventually(() => outcomes.length === 1, 5_000, 'the outcome')
        expect(outcomes).toEqual(['invalid'])
      })

      it(`refuses a publish ${library} refuses before anything is written, naming the issues`, async () => {
        const q = await queue()
        const orders = mq.publisher('', q).withSchema(Order)
        const refused = await orders.send({ id: 7 } as never).catch((error: unknown) => error)
        expect(errorCodeOf(refused)).toBe(ErrorCodes.INVALID_PAYLOAD)
        expect(String((refused as Error).message)).toMatch(/\bid: .*total: /)
        await orders.send({ id: 'o-2', total: 3 })
        await eventually(async () => (await probe.count(q)) === 1, 5_000, 'the valid order')
        const sent = (await probe.get(q)) as InspectedMessage
        expect(JSON.parse(Buffer.from(sent.body).toString())).toEqual({ id: 'o-2', total: 3 })
      })
    }

    it('writes none of a sendAll when one payload is refused', async () => {
      const q = await queue()
      const orders = mq.publisher('', q).withSchema(ORDER_SCHEMAS[0]![1])
      const refused = await orders
        .sendAll([
          { id: 'a', total: 1 },
          { id: 'b', total: -1 },
        ])
        .catch((error: unknown) => error)
      expect(errorCodeOf(refused)).toBe(ErrorCodes.INVALID_PAYLOAD)
      await new Promise((resolve) => setTimeout(resolve, 100))
      expect(await probe.count(q)).toBe(0)
    })

    it('validates with an async schema', async () => {
      const q = await queue()
      const known = new Set(['c-1'])
      const Customer = z.object({ customer: z.string() }).refine(
        async (value) => {
          await new Promise((resolve) => setTimeout(resolve, 5))
          return known.has(value.customer)
        },
        { message: 'unknown customer', path: ['customer'] },
      )
      const seen: string[] = []
      await consume(
        q,
        withSchema(Customer, (message) => void seen.push(message.payload.customer)),
      )
      const publisher = mq.publisher('', q)
      await publisher.send({ customer: 'c-1' })
      await publisher.send({ customer: 'c-9' })
      const copy = await dlqCopy(q)
      expect(seen).toEqual(['c-1'])
      expect(readEnvelope(copy.headers, { routingKey: q }).envelope.error).toContain(
        'customer: unknown customer',
      )
    })

    it('retries when the schema itself throws: a failure of the code, not of the payload', async () => {
      const q = await queue()
      let calls = 0
      const flaky: StandardSchemaV1<unknown, unknown> = {
        '~standard': {
          version: 1,
          vendor: 'test',
          validate(value) {
            calls += 1
            if (calls === 1) throw new Error('lookup service down')
            return { value }
          },
        },
      }
      const attempts: number[] = []
      await consume(
        q,
        withSchema(flaky, (message) => void attempts.push(message.envelope.attempt)),
      )
      await mq.publisher('', q).send({ id: 'o-3' })
      await eventually(() => attempts.length === 1, 10_000, 'the second attempt')
      expect(attempts).toEqual([2])
      expect(await probe.count(`${q}.dlq`)).toBe(0)
    })

    it('bounds the reason of a message with 10,000 issues and still dead-letters it', async () => {
      const q = await queue()
      const Numbers = z.array(z.number())
      await consume(
        q,
        withSchema(Numbers, () => undefined),
      )
      await mq.publisher('', q).send(Array.from({ length: 10_000 }, (_, i) => `n${i}`))
      const copy = await dlqCopy(q)
      const reason = readEnvelope(copy.headers, { routingKey: q }).envelope.error ?? ''
      expect(reason).toMatch(/^invalid payload \(10000 issue\(s\)\): \[0\]: /)
      expect(reason).toMatch(/… and 99\d\d more issue\(s\)$/)
      expect(reason.length).toBeLessThanOrEqual(1_100)
    })
  })
}

/**
 * The encrypting codec (docs/design.md §26) on one transport: a rotation between publish and
 * consume, and bodies that cannot be decrypted parked with the key id and never the key.
 */
export function encryptionScenarios(name: string, target: ScenarioTarget): void {
  describe(`encrypted payloads on ${name}`, () => {
    const key1 = randomBytes(32)
    const key2 = randomBytes(32)
    let ring: KeyRing
    /** Everything the library said: onError reports, telemetry's reasons and errors. */
    const said: unknown[] = []
    let connection: ScenarioConnection
    let mq: AceMq
    let probe: BrokerProbe
    const queues: string[] = []
    const consumers: Consumer[] = []

    beforeEach(async () => {
      ring = KeyRing.of({ k1: key1 }, 'k1')
      said.length = 0
      const codecs = CodecRegistry.defaults().with(
        encryptedCodec({ inner: jsonCodec, keys: () => ring }),
      )
      connection = await openScenario(target, undefined, {
        codecs,
        onError: (error, context) => void said.push(error, context),
      })
      ;({ mq, probe } = connection)
      mq.setInstrumentation({
        publishStarted: () => ({ end: (outcome, error) => void said.push(outcome, error) }),
        processStarted: (info) => {
          said.push(info)
          return {
            run: (fn) => fn(),
            handled: (_ms, error) => void said.push(error),
            retried: () => undefined,
            setAside: (outcome, queue, reason) => void said.push(outcome, queue, reason),
            end: (outcome, error) => void said.push(outcome, error),
          }
        },
      })
    })
    afterEach(async () => {
      for (const consumer of consumers.splice(0)) await consumer.close({ drainTimeout: 0 })
      await closeScenario(connection, queues)
    })

    async function queue(): Promise<string> {
      const q = uniqueName('encrypted')
      queues.push(q)
      await mq.applyTopology(Topology.define().queueWithDeadLetter(q))
      return q
    }

    function publisher(q: string) {
      return mq.publisher('', q, { contentType: ENCRYPTED_CONTENT_TYPE })
    }

    async function parkedReason(q: string): Promise<{ reason: string; copy: InspectedMessage }> {
      await eventually(async () => (await probe.count(`${q}.parked`)) === 1, 10_000, 'parked')
      const copy = (await probe.get(`${q}.parked`)) as InspectedMessage
      return { reason: readEnvelope(copy.headers, { routingKey: q }).envelope.error ?? '', copy }
    }

    function expectNoKeyIn(...things: unknown[]): void {
      const printed = things.map((thing) => inspect(thing, { depth: 8 })).join('\n')
      for (const key of [key1, key2]) {
        for (const form of [key.toString('hex'), key.toString('base64'), key.toString('latin1')]) {
          expect(printed).not.toContain(form)
        }
      }
    }

    it('delivers a message published under the old key after a rotation between publish and consume', async () => {
      const q = await queue()
      await publisher(q).send({ salary: 5_100 })
      ring = ring.with('k2', key2, true)
      const seen = await collectPayloads(mq, q, consumers)
      await eventually(() => seen.length === 1, 10_000, 'the decrypted message')
      expect(seen).toEqual([{ salary: 5_100 }])
    })

    it('parks a message under a key the ring no longer holds, naming the key id and never a key', async () => {
      const q = await queue()
      await publisher(q).send({ salary: 5_200 })
      ring = KeyRing.of({ k2: key2 }, 'k2')
      let ran = 0
      consumers.push(await mq.consume(q, ConsumerOptions.defaults(), () => void (ran += 1)))
      const { reason, copy } = await parkedReason(q)
      expect(reason).toBe(
        "could not decode: the body is encrypted under key 'k1', which the key ring does not hold (it holds k2)",
      )
      expect(ran).toBe(0)
      expect(copy.contentType).toBe(ENCRYPTED_CONTENT_TYPE)
      expectNoKeyIn(said, copy.headers, reason)
    })

    it('parks a body encrypted under another key of the same id, naming the id and never a key', async () => {
      const q = await queue()
      await publisher(q).send({ salary: 5_300 })
      ring = KeyRing.of({ k1: key2 }, 'k1')
      consumers.push(await mq.consume(q, ConsumerOptions.defaults(), () => undefined))
      const { reason, copy } = await parkedReason(q)
      expect(reason).toContain(
        "could not decode: the body encrypted under key 'k1' does not authenticate",
      )
      expectNoKeyIn(said, copy.headers, reason)
    })

    it('parks a tampered body', async () => {
      const q = await queue()
      const body = Buffer.from(encryptedCodec({ inner: jsonCodec, keys: ring }).encode({ a: 1 }))
      body[body.length - 1] = (body[body.length - 1] as number) ^ 0xff
      await probe.sendRaw(q, body, { contentType: ENCRYPTED_CONTENT_TYPE })
      consumers.push(await mq.consume(q, ConsumerOptions.defaults(), () => undefined))
      const { reason } = await parkedReason(q)
      expect(reason).toContain('or the body was altered')
    })

    it('refuses to publish through a ring without a current key, writing nothing', async () => {
      const q = await queue()
      ring = KeyRing.of({ k1: key1 })
      const refused = await publisher(q)
        .send({ salary: 1 })
        .catch((error: unknown) => error)
      expect(errorCodeOf(refused)).toBe(ErrorCodes.CONFIGURATION)
      expect((refused as Error).message).toContain('no current key to encrypt with (it holds k1)')
      expect(await probe.count(q)).toBe(0)
      expectNoKeyIn(refused)
    })
  })
}

const DAY = 86_400_000

/** The key of a claim-check reference body (`ac 01 01` + key), or undefined for another body. */
function referenceKey(body: Uint8Array): string | undefined {
  const bytes = Buffer.from(body)
  if (bytes[0] !== 0xac || bytes[1] !== 0x01 || bytes[2] !== 0x01) return undefined
  return bytes.toString('utf8', 3)
}

/**
 * Claim checks (docs/design.md §26) on one transport: a 5 MB payload crosses as a reference,
 * its stored body outlives the ack, the dead-lettering and the replay, and goes only with the
 * purge once the retention has passed; a reference whose body is gone is parked, once.
 */
export function claimCheckScenarios(name: string, target: ScenarioTarget): void {
  describe(`claim checks on ${name}`, () => {
    let directory: string
    let files: FileClaimCheckStore
    /** Fails the next `failGets` reads, as a store that is down would. */
    let failGets = 0
    let connection: ScenarioConnection
    let mq: AceMq
    let probe: BrokerProbe
    const queues: string[] = []
    const consumers: Consumer[] = []

    beforeEach(async () => {
      directory = await mkdtemp(path.join(tmpdir(), 'acemq-claims-'))
      files = new FileClaimCheckStore(directory)
      failGets = 0
      const store: ClaimCheckStore = {
        put: (key, body, expiresAt) => files.put(key, body, expiresAt),
        async get(key) {
          if (failGets > 0) {
            failGets -= 1
            throw new Error('claim-check volume not mounted')
          }
          return files.get(key)
        },
        delete: (key) => files.delete(key),
        purgeExpired: (now) => files.purgeExpired(now),
      }
      const codecs = CodecRegistry.defaults().with(
        claimCheckCodec({ inner: jsonCodec, store, retention: '7d' }),
      )
      connection = await openScenario(target, undefined, { codecs })
      ;({ mq, probe } = connection)
    })
    afterEach(async () => {
      for (const consumer of consumers.splice(0)) await consumer.close({ drainTimeout: 0 })
      await closeScenario(connection, queues)
      await rm(directory, { recursive: true, force: true })
    })

    async function queue(): Promise<string> {
      const q = uniqueName('claims')
      queues.push(q)
      await mq.applyTopology(Topology.define().queueWithDeadLetter(q))
      return q
    }

    /** Publishes `payload`, takes it off the queue to read its key, and puts it back as it was. */
    async function publishAndPeek(q: string, payload: unknown): Promise<InspectedMessage> {
      await mq.publisher('', q).send(payload)
      await eventually(async () => (await probe.count(q)) === 1, 10_000, 'the published message')
      const sent = (await probe.get(q)) as InspectedMessage
      await probe.sendRaw(q, sent.body, {
        headers: sent.headers,
        ...(sent.contentType === undefined ? {} : { contentType: sent.contentType }),
        ...(sent.messageId === undefined ? {} : { messageId: sent.messageId }),
      })
      return sent
    }

    it('carries a 5 MB payload as a reference and keeps its body after the ack', async () => {
      const q = await queue()
      const payload = { id: 'big-1', blob: randomBytes(3_750_000).toString('base64') }
      const sent = await publishAndPeek(q, payload)
      const key = referenceKey(sent.body)
      expect(key).toMatch(/^[0-9a-f-]{36}$/)
      expect(sent.body.length).toBe(3 + 36)
      expect(sent.contentType).toBe('application/json')
      const seen = await collectPayloads(mq, q, consumers)
      await eventually(() => seen.length === 1, 20_000, 'the 5 MB message')
      expect(seen[0]).toEqual(payload)
      await eventually(async () => (await probe.count(q)) === 0, 5_000, 'the ack')
      // Acked, yet kept: a retry or a dead-lettered copy of the message may still point at it.
      expect((await files.get(key as string))?.length).toBeGreaterThan(5_000_000)
    })

    it('keeps the body a dead-lettered copy needs, through its replay, until the retention has passed', async () => {
      const q = await queue()
      const sent = await publishAndPeek(q, { id: 'big-2', blob: 'x'.repeat(100_000) })
      const key = referenceKey(sent.body) as string
      let fail = true
      const seen: string[] = []
      consumers.push(
        await mq.consume(q, ConsumerOptions.defaults(), (message) => {
          if (fail) throw new FatalError('rejected by billing')
          seen.push((message.payload as { id: string }).id)
        }),
      )
      await eventually(async () => (await probe.count(`${q}.dlq`)) === 1, 10_000, 'the dlq copy')
      expect(await files.get(key)).toBeDefined()
      fail = false
      expect(await mq.replay(`${q}.dlq`).into(q).replayAll()).toBe(1)
      await eventually(() => seen.length === 1, 10_000, 'the replayed message')
      expect(seen).toEqual(['big-2'])
      expect(await files.get(key)).toBeDefined()
      // Within the retention (7 days) the purge keeps it; past it, the purge removes it.
      expect(await files.purgeExpired(Date.now() + 6 * DAY)).toBe(0)
      expect(await files.purgeExpired(Date.now() + 7 * DAY + 60_000)).toBe(1)
      expect(await files.get(key)).toBeUndefined()
    })

    it('parks a reference whose body is gone, naming the key, once', async () => {
      const q = await queue()
      const sent = await publishAndPeek(q, { blob: 'y'.repeat(70_000) })
      const key = referenceKey(sent.body) as string
      await files.delete(key)
      let ran = 0
      consumers.push(await mq.consume(q, ConsumerOptions.defaults(), () => void (ran += 1)))
      await eventually(async () => (await probe.count(`${q}.parked`)) === 1, 10_000, 'parked')
      const copy = (await probe.get(`${q}.parked`)) as InspectedMessage
      const reason = readEnvelope(copy.headers, { routingKey: q }).envelope.error
      expect(reason).toBe(
        `could not decode: the claim-check key '${key}' is not in the store: its body was purged (kept 7d after publish) or never stored`,
      )
      expect(ran).toBe(0)
      expect(Buffer.from(copy.body).equals(Buffer.from(sent.body))).toBe(true)
    })

    it('retries, never parks, when the store fails to answer', async () => {
      const q = await queue()
      await publishAndPeek(q, { id: 'big-3', blob: 'z'.repeat(70_000) })
      failGets = 1
      const attempts: number[] = []
      consumers.push(
        await mq.consume(
          q,
          ConsumerOptions.defaults().withRetry(RetryPolicy.fixed(3, 10)),
          (message) => void attempts.push(message.envelope.attempt),
        ),
      )
      await eventually(() => attempts.length === 1, 10_000, 'the retried message')
      expect(attempts).toEqual([2])
      expect(await probe.count(`${q}.parked`)).toBe(0)
    })

    it('reads a small payload inline, and a body from a publisher without claim checks as it is', async () => {
      const q = await queue()
      const sent = await publishAndPeek(q, { id: 'small' })
      expect([...Buffer.from(sent.body).subarray(0, 3)]).toEqual([0xac, 0x01, 0x00])
      await probe.sendRaw(q, Buffer.from('{"id":"plain"}'), { contentType: 'application/json' })
      const seen = await collectPayloads(mq, q, consumers)
      await eventually(() => seen.length === 2, 10_000, 'both messages')
      expect(seen).toEqual([{ id: 'small' }, { id: 'plain' }])
    })
  })
}
