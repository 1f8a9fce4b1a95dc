import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { DeadLetterArchive, InMemoryTransport, type DeadLetterArchiveStore } from '@acemq/core'
import { decodeWireJson, encodeWireJson, type ArchivedMessage } from '@acemq/core/spi'
import { eventually } from '../helpers/eventually.js'

/** A store under test, on fresh tables. */
export interface ArchiveConformanceFixture {
  readonly store: DeadLetterArchiveStore
  /** Closes the store and removes its tables. */
  cleanup(): Promise<void>
}

/** Builds one fresh fixture per test. */
export interface ArchiveConformanceFactory {
  create(): Promise<ArchiveConformanceFixture>
}

const START = Date.UTC(2030, 0, 1)

/** Every byte value, so a body that is no text comes back byte for byte. */
const ALL_BYTES = new Uint8Array(Array.from({ length: 256 }, (_, i) => i))

/** Headers of every type a broker hands over: they must come back as they went in. */
const WIRE_HEADERS = {
  'x-acemq-id': 'id-1',
  'x-acemq-type': 'order.placed',
  'x-acemq-attempt': { '!': 'int', value: 3 },
  'x-acemq-first-seen': { '!': 'long', value: START - 60_000 },
  'x-acemq-error': 'gave up after 3 attempt(s): Timeout <script>',
  'x-acemq-correlation': 'corr-1',
  traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
  big: 2n ** 63n - 1n,
  bytes: Buffer.from([0, 255, 1]),
  float: 1.5,
  negativeZero: -0,
  flag: false,
  nothing: null,
  list: [1, 'two', Buffer.from([3])],
  table: { $b: 'not bytes', nested: { '!': 'timestamp', value: 1_700_000_000 } },
  'right-to-left\u202e': 'gnp.exe',
}

/**
 * Registers the cases every dead-letter archive store must pass: every header and property
 * kept byte-type-exact, one row per dead letter however often it is redelivered, the filters
 * (queue, type, reason text, id, time, status) with paging, marks that change a message once,
 * tombstones purged after their retention, the audit log — and, through a
 * {@link DeadLetterArchive} on the in-memory transport, the collector, replay, discard,
 * edit-and-replay and their batches.
 *
 * @example
 * ```ts
 * archiveStoreConformance('SQLite', { async create() { ... } })
 * ```
 */
export function archiveStoreConformance(name: string, factory: ArchiveConformanceFactory): void {
  describe(`${name}: the dead-letter archive store contract`, () => {
    let fixture: ArchiveConformanceFixture
    let store: DeadLetterArchiveStore
    let seq = 0
    const message = (overrides: Partial<ArchivedMessage> = {}): ArchivedMessage => {
      seq++
      return {
        id: `a-${String(seq).padStart(4, '0')}`,
        key: `key-${seq}-${Math.random()}`,
        queue: 'orders.placed.dlq',
        messageId: `m-${seq}`,
        messageType: 'order.placed',
        reason: 'Timeout talking to payments',
        attempt: 3,
        firstSeen: START - 60_000,
        archivedAt: START + seq * 1_000,
        correlationId: `c-${seq}`,
        traceparent: undefined,
        exchange: '',
        routingKey: 'orders.placed',
        body: new TextEncoder().encode(`{"n":${seq}}`),
        headers: encodeWireJson({ 'x-acemq-id': `m-${seq}` }),
        properties: encodeWireJson({ contentType: 'application/json', messageId: `m-${seq}` }),
        status: 'archived',
        statusAt: undefined,
        statusBy: undefined,
        replayedTo: undefined,
        ...overrides,
      }
    }

    beforeEach(async () => {
      fixture = await factory.create()
      store = fixture.store
    })

    afterEach(async () => {
      await fixture.cleanup()
    })

    it('keeps every header and property with its type, and the body byte for byte', async () => {
      const kept = message({
        body: ALL_BYTES,
        headers: encodeWireJson(WIRE_HEADERS),
        properties: encodeWireJson({
          contentType: 'application/octet-stream',
          priority: 7,
          timestamp: 1_700_000_000,
        }),
        traceparent: WIRE_HEADERS.traceparent,
        reason: 'gave up — “quoted” ünïcödé 😀',
      })
      expect(await store.add(kept)).toBe(true)
      const back = await store.get(kept.id)
      expect(back).toEqual({ ...kept, body: expect.any(Uint8Array) })
      expect(Buffer.from(back?.body ?? []).equals(Buffer.from(ALL_BYTES))).toBe(true)
      const headers = decodeWireJson(back?.headers ?? '{}') as Record<string, unknown>
      expect(headers).toEqual(WIRE_HEADERS)
      expect(typeof headers['big']).toBe('bigint')
      expect(Object.is(headers['negativeZero'], -0)).toBe(true)
      expect(headers['bytes']).toBeInstanceOf(Uint8Array)
    })

    it('keeps one row per dead letter: adding the same key again changes nothing', async () => {
      const first = message({ key: 'same-key' })
      expect(await store.add(first)).toBe(true)
      expect(await store.add(message({ key: 'same-key' }))).toBe(false)
      expect((await store.find({})).messages.map((m) => m.id)).toEqual([first.id])
    })

    it('finds by queue, message type, reason text (any case, % and _ literal), id and time range', async () => {
      const a = message({ queue: 'a.dlq', reason: 'Timeout 100% _x' })
      const b = message({ queue: 'b.parked', messageType: 'invoice.sent', reason: 'bad input' })
      const c = message({ queue: 'a.dlq', reason: 'timeout 1000 yx' })
      for (const m of [a, b, c]) await store.add(m)
      const ids = async (
        filter: Parameters<DeadLetterArchiveStore['find']>[0],
      ): Promise<string[]> => (await store.find(filter)).messages.map((m) => m.id)
      expect(await ids({ queue: 'a.dlq' })).toEqual([c.id, a.id])
      expect(await ids({ messageType: 'invoice.sent' })).toEqual([b.id])
      expect(await ids({ reason: 'TIMEOUT' })).toEqual([c.id, a.id])
      expect(await ids({ reason: '100%' })).toEqual([a.id])
      expect(await ids({ reason: '_x' })).toEqual([a.id])
      expect(await ids({ id: b.messageId })).toEqual([b.id])
      expect(await ids({ id: c.id })).toEqual([c.id])
      expect(await ids({ from: b.archivedAt, to: c.archivedAt })).toEqual([b.id])
      expect(await ids({ queue: 'a.dlq', reason: 'bad' })).toEqual([])
    })

    it('pages newest first, every message once', async () => {
      const added: string[] = []
      for (let i = 0; i < 7; i++) {
        const m = message({ archivedAt: START + Math.floor(i / 2) * 1_000 })
        added.push(m.id)
        await store.add(m)
      }
      const seen: string[] = []
      let after: string | undefined
      let pages = 0
      do {
        const page = await store.find({ limit: 3, ...(after === undefined ? {} : { after }) })
        seen.push(...page.messages.map((m) => m.id))
        after = page.next
        pages++
      } while (after !== undefined && pages < 10)
      expect(pages).toBe(3)
      expect(seen).toEqual([...added].reverse())
    })

    it('refuses a bad filter, naming the field and the value', async () => {
      await expect(store.find({ limit: 0 })).rejects.toThrow(
        'filter.limit must be a whole number from 1 to 500; got 0',
      )
      await expect(store.find({ after: 'nonsense' })).rejects.toThrow(
        'filter.after is no page cursor; got "nonsense"',
      )
    })

    it('marks a message once: one replayed or discarded already is never changed again', async () => {
      const m = message()
      await store.add(m)
      expect(
        await store.mark([m.id], { status: 'replayed', at: START, by: 'ana', replayedTo: 'q' }),
      ).toBe(1)
      expect(await store.mark([m.id], { status: 'discarded', at: START + 1, by: 'bo' })).toBe(0)
      expect(await store.get(m.id)).toMatchObject({
        status: 'replayed',
        statusAt: START,
        statusBy: 'ana',
        replayedTo: 'q',
      })
      expect((await store.find({ status: 'archived' })).messages).toEqual([])
    })

    it('purges replayed and discarded messages past their retention, never one still archived', async () => {
      const [old, recent, kept] = [message(), message(), message()]
      for (const m of [old, recent, kept]) await store.add(m)
      await store.mark([old.id], { status: 'discarded', at: START, by: 'ana' })
      await store.mark([recent.id], { status: 'discarded', at: START + 10_000, by: 'ana' })
      expect(await store.purge(START + 5_000)).toBe(1)
      expect((await store.find({})).messages.map((m) => m.id).sort()).toEqual(
        [recent.id, kept.id].sort(),
      )
    })

    it('keeps the audit log, newest first', async () => {
      const first = {
        id: 'e1',
        at: START,
        actor: 'ana',
        action: 'replay',
        count: 2,
        ids: ['a', 'b'],
        detail: 'to q',
      }
      const second = {
        ...first,
        id: 'e2',
        at: START + 1,
        actor: 'bo',
        action: 'discard',
        count: 1,
        ids: ['c'],
        detail: '',
      }
      await store.audit(first)
      await store.audit(second)
      expect(await store.auditLog()).toEqual([second, first])
      expect(await store.auditLog({ limit: 1 })).toHaveLength(1)
    })

    describe('under a DeadLetterArchive', () => {
      let transport: InMemoryTransport
      let archive: DeadLetterArchive
      let clock = START
      const queue = (name: string) => ({
        kind: 'queue' as const,
        name,
        type: 'classic' as const,
        durable: true,
        arguments: {},
      })

      beforeEach(async () => {
        clock = START
        transport = new InMemoryTransport()
        await transport.connect()
        await transport.declare([
          queue('orders.placed'),
          queue('orders.placed.dlq'),
          queue('orders.other'),
        ])
        archive = new DeadLetterArchive({ transport, store, now: () => (clock += 1_000) })
      })

      afterEach(async () => {
        await transport.close()
      })

      const deadLetter = async (id: string, body = `{"id":"${id}"}`): Promise<void> => {
        await transport.publish({
          exchange: '',
          routingKey: 'orders.placed.dlq',
          body: new TextEncoder().encode(body),
          headers: { ...WIRE_HEADERS, 'x-acemq-id': id },
          properties: { contentType: 'application/json', messageId: id },
          persistent: true,
          mandatory: true,
        })
      }

      const collectAll = async (count: number): Promise<ArchivedMessage[]> => {
        const collector = await archive.collect(['orders.placed.dlq'])
        await eventually(
          () =>
            collector.archived === count &&
            transport.messageCount('orders.placed.dlq') === 0 &&
            transport.unackedCount('orders.placed.dlq') === 0,
          5_000,
          `${count} archived and acked`,
        )
        await collector.close()
        return [...(await archive.find({})).messages].reverse()
      }

      it('collects dead letters into the archive, acking each once kept, with its envelope fields', async () => {
        await deadLetter('m-1')
        await deadLetter('m-2')
        const kept = await collectAll(2)
        expect(
          kept.map((m) => [
            m.queue,
            m.messageId,
            m.messageType,
            m.attempt,
            m.reason,
            m.correlationId,
            m.traceparent,
          ]),
        ).toEqual([
          [
            'orders.placed.dlq',
            'm-1',
            'order.placed',
            3,
            WIRE_HEADERS['x-acemq-error'],
            'corr-1',
            WIRE_HEADERS.traceparent,
          ],
          [
            'orders.placed.dlq',
            'm-2',
            'order.placed',
            3,
            WIRE_HEADERS['x-acemq-error'],
            'corr-1',
            WIRE_HEADERS.traceparent,
          ],
        ])
        expect(decodeWireJson(kept[0]?.headers ?? '{}')).toEqual({
          ...WIRE_HEADERS,
          'x-acemq-id': 'm-1',
        })
      })

      it('refuses to collect from a queue that is no .dlq or .parked queue', async () => {
        await expect(archive.collect(['orders.placed'])).rejects.toThrow(
          "queues: 'orders.placed' is no .dlq or .parked queue",
        )
      })

      it('replays to the source queue, confirmed, then marks it; a second replay does nothing; the audit log says who, what and how many', async () => {
        await deadLetter('m-1')
        const [kept] = await collectAll(1)
        const id = kept?.id as string
        expect(await archive.replay([id], { actor: 'ana' })).toEqual({ changed: 1, skipped: [] })
        const copies = transport.peek('orders.placed')
        expect(copies).toHaveLength(1)
        expect(copies[0]?.headers['x-acemq-id']).toBe('m-1')
        expect(copies[0]?.headers['x-acemq-error']).toBeUndefined()
        expect(copies[0]?.headers['acemq-replayed-from']).toBe('orders.placed.dlq')
        expect(copies[0]?.headers['bytes']).toEqual(Buffer.from([0, 255, 1]))
        expect(await archive.get(id)).toMatchObject({
          status: 'replayed',
          statusBy: 'ana',
          replayedTo: 'orders.placed',
        })
        expect(await archive.replay([id], { actor: 'bo' })).toEqual({ changed: 0, skipped: [id] })
        expect(transport.messageCount('orders.placed')).toBe(1)
        const log = await archive.auditLog()
        expect(log.map((e) => [e.actor, e.action, e.count, e.ids])).toEqual([
          ['bo', 'replay', 0, [id]],
          ['ana', 'replay', 1, [id]],
        ])
        expect(log[1]?.detail).toBe('to orders.placed')
      })

      it('leaves a message archived when its copy cannot be delivered, and says how many went before', async () => {
        await deadLetter('m-1')
        const [kept] = await collectAll(1)
        const id = kept?.id as string
        await expect(archive.replay([id], { actor: 'ana', into: 'no.such.queue' })).rejects.toThrow(
          /stays archived; 0 replayed before/,
        )
        expect(await archive.get(id)).toMatchObject({ status: 'archived' })
        expect((await archive.auditLog())[0]).toMatchObject({
          actor: 'ana',
          action: 'replay',
          count: 0,
        })
      })

      it('replays, discards and edits in batches; a discarded message stays as a tombstone', async () => {
        for (const id of ['m-1', 'm-2', 'm-3', 'm-4']) await deadLetter(id)
        const ids = (await collectAll(4)).map((m) => m.id)
        expect(
          await archive.replay(ids.slice(0, 2), { actor: 'ana', into: 'orders.other' }),
        ).toEqual({ changed: 2, skipped: [] })
        expect(transport.peek('orders.other').map((m) => m.headers['x-acemq-id'])).toEqual([
          'm-1',
          'm-2',
        ])
        expect(
          await archive.discard([ids[2] as string, ids[0] as string], { actor: 'bo' }),
        ).toEqual({ changed: 1, skipped: [ids[0]] })
        expect(await archive.get(ids[2] as string)).toMatchObject({
          status: 'discarded',
          statusBy: 'bo',
        })
        const edited = new TextEncoder().encode('{"id":"m-4","fixed":true}')
        expect(await archive.editAndReplay(ids[3] as string, edited, { actor: 'cy' })).toEqual({
          changed: 1,
          skipped: [],
        })
        const [copy] = transport.peek('orders.placed')
        expect(new TextDecoder().decode(copy?.body)).toBe('{"id":"m-4","fixed":true}')
        expect(copy?.headers['x-acemq-id']).toBe('m-4')
        expect(copy?.properties.messageId).toBe('m-4')
        expect((await archive.auditLog()).map((e) => [e.actor, e.action, e.count])).toEqual([
          ['cy', 'edit-and-replay', 1],
          ['bo', 'discard', 1],
          ['ana', 'replay', 2],
        ])
      })

      it('edits and replays under a new envelope id only when asked', async () => {
        await deadLetter('m-1')
        const [kept] = await collectAll(1)
        await archive.editAndReplay(kept?.id as string, new Uint8Array([1]), {
          actor: 'ana',
          newId: true,
        })
        const [copy] = transport.peek('orders.placed')
        expect(copy?.headers['x-acemq-id']).not.toBe('m-1')
        expect(copy?.properties.messageId).toBe(copy?.headers['x-acemq-id'])
      })

      it('lists actions of the same millisecond in the order they were taken', async () => {
        const stopped = new DeadLetterArchive({ transport, store, now: () => START })
        for (const actor of ['first', 'second', 'third']) await stopped.discard([], { actor })
        expect((await stopped.auditLog()).map((e) => e.actor)).toEqual(['third', 'second', 'first'])
      })

      it('refuses an action without an actor, naming the argument', async () => {
        await expect(archive.replay(['x'], { actor: '' })).rejects.toThrow(
          'actor must name who acts; got ""',
        )
      })
    })
  })
}
