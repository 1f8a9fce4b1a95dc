import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  ConfigurationError,
  ReplayStoppedError,
  Topology,
  type AceMq,
  type Headers,
  type ReplayMessage,
} from '@acemq/core'
import { headerInteger, readEnvelope, type GiveBack, type Transport } from '@acemq/core/spi'
import {
  closeScenario,
  openScenario,
  type BrokerProbe,
  type ScenarioConnection,
  type ScenarioTarget,
} from './engine-scenarios.js'
import { uniqueName } from '../services/services.js'

const RFC3339_SECONDS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/

/** A message set aside by an earlier consumer, as it sits in a dead-letter queue. */
function deadLettered(
  id: string,
  extra: Headers = {},
): { body: Uint8Array; properties: { contentType: string; messageId: string; headers: Headers } } {
  return {
    body: Buffer.from(JSON.stringify({ id })),
    properties: {
      contentType: 'application/json',
      messageId: id,
      headers: {
        'x-acemq-id': id,
        'x-acemq-attempt': { '!': 'int', value: 3 },
        'x-acemq-first-seen': { '!': 'long', value: Date.UTC(2026, 0, 1) },
        'x-acemq-error': 'gave up after 3 attempt(s): billing said no',
        ...extra,
      },
    },
  }
}

async function idsIn(probe: BrokerProbe, queue: string): Promise<string[]> {
  const ids: string[] = []
  for (;;) {
    const message = await probe.get(queue)
    if (message === undefined) return ids
    ids.push(readEnvelope(message.headers, { routingKey: queue }).envelope.id)
  }
}

/**
 * Replay from a dead-letter queue, run against every transport that can take messages one by
 * one: the family's scenario, attempts kept or restarted, filters and limits, failed
 * publishes that leave the message where it was, peeks that change nothing, and the refusals.
 */
export function replayScenarios(name: string, target: ScenarioTarget): void {
  describe(`replay on ${name}`, () => {
    let connection: ScenarioConnection<Transport>
    let mq: AceMq
    let probe: BrokerProbe
    const queues: string[] = []
    let queue: string
    let dlq: string

    beforeEach(async () => {
      connection = await openScenario(target)
      mq = connection.mq
      probe = connection.probe
      queue = uniqueName('replay')
      dlq = `${queue}.dlq`
      queues.push(queue)
      await mq.applyTopology(Topology.define().queueWithDeadLetter(queue))
    })

    afterEach(async () => {
      await closeScenario(connection, queues)
    })

    it('brings back a message at attempt 1 with no error header, replay count 3, the RFC 3339 stamp and no legacy header', async () => {
      const { body, properties } = deadLettered('order-1', {
        'x-acemq-replay-count': { '!': 'int', value: 2 },
        'x-tenant': 'acme',
      })
      await probe.sendRaw(dlq, body, properties)
      const before = Math.floor(Date.now() / 1000) * 1000

      expect(await mq.replay(dlq).replayAll()).toBe(1)

      expect(await probe.count(dlq)).toBe(0)
      const copy = await probe.get(queue)
      expect(copy).toBeDefined()
      const headers = copy?.headers ?? {}
      const { envelope, headers: application } = readEnvelope(headers, { routingKey: queue })
      expect(envelope.id).toBe('order-1')
      expect(envelope.attempt).toBe(1)
      expect(envelope.error).toBeUndefined()
      expect(envelope.firstSeen).toBe(Date.UTC(2026, 0, 1))
      expect(Object.keys(headers)).not.toContain('x-acemq-error')
      expect(Object.keys(headers)).not.toContain('x-acemq-replay-count')
      expect(headerInteger(application['acemq-replay-count'])).toBe(3)
      expect(application['acemq-replayed-from']).toBe(dlq)
      const at = String(application['acemq-replayed-at'])
      expect(at).toMatch(RFC3339_SECONDS)
      expect(Date.parse(at)).toBeGreaterThanOrEqual(before)
      expect(Date.parse(at)).toBeLessThanOrEqual(Date.now())
      expect(application['x-tenant']).toBe('acme')
      expect(Buffer.from(copy?.body ?? []).toString()).toBe('{"id":"order-1"}')
    })

    it('keeps the attempt with keepingAttempts(), and counts a first replay as 1', async () => {
      const { body, properties } = deadLettered('order-2')
      await probe.sendRaw(dlq, body, properties)
      expect(await mq.replay(dlq).keepingAttempts().replayAll()).toBe(1)
      const copy = await probe.get(queue)
      const { envelope, headers } = readEnvelope(copy?.headers, { routingKey: queue })
      expect(envelope.attempt).toBe(3)
      expect(headerInteger(headers['acemq-replay-count'])).toBe(1)
    })

    it('moves at most n messages the filter accepts and leaves the others in their order', async () => {
      for (let i = 1; i <= 6; i++) {
        const { body, properties } = deadLettered(`m-${i}`, { 'x-tenant': i % 2 === 0 ? 'a' : 'b' })
        await probe.sendRaw(dlq, body, properties)
      }
      expect(await mq.replay(dlq).pending()).toBe(6)
      const moved = await mq.replay(dlq).replay(2, (message) => message.headers['x-tenant'] === 'a')
      expect(moved).toBe(2)
      expect(await idsIn(probe, queue)).toEqual(['m-2', 'm-4'])
      expect(await idsIn(probe, dlq)).toEqual(['m-1', 'm-3', 'm-5', 'm-6'])
    })

    it('leaves the message on the source and rejects when its publish fails', async () => {
      const { body, properties } = deadLettered('order-3')
      await probe.sendRaw(dlq, body, properties)
      const missing = uniqueName('replay.nowhere')
      const stopped = await mq
        .replay(dlq)
        .into(missing)
        .replayAll()
        .then(
          () => undefined,
          (error: unknown) => error,
        )
      expect(stopped).toBeInstanceOf(ReplayStoppedError)
      expect(stopped).toMatchObject({ moved: 0, notWritten: ['order-3'] })
      expect(String((stopped as Error).message)).toMatch(
        /stopped after moving 0 message\(s\): message 'order-3' could not be written \(.*\)/,
      )
      expect(await probe.count(dlq)).toBe(1)
      expect(await idsIn(probe, dlq)).toEqual(['order-3'])
    })

    it('replays a foreign message whose 300-byte id cannot be an AMQP message-id, the id kept in x-acemq-id', async () => {
      const id = `foreign-${'x'.repeat(292)}`
      const { body, properties } = deadLettered(id)
      const { messageId: _tooLong, ...withoutMessageId } = properties
      await probe.sendRaw(dlq, body, withoutMessageId)

      expect(await mq.replay(dlq).replayAll()).toBe(1)

      expect(await probe.count(dlq)).toBe(0)
      const copy = await probe.get(queue)
      expect(copy?.messageId).toBeUndefined()
      expect(readEnvelope(copy?.headers, { routingKey: queue }).envelope.id).toBe(id)
    })

    it('peeks without removing anything or changing the order', async () => {
      for (let i = 1; i <= 4; i++) {
        const { body, properties } = deadLettered(`p-${i}`)
        await probe.sendRaw(dlq, body, properties)
      }
      const seen = await mq.replay(dlq).peek(3)
      expect(seen.map((m) => [m.envelope.id, m.envelope.attempt, m.envelope.error])).toEqual([
        ['p-1', 3, 'gave up after 3 attempt(s): billing said no'],
        ['p-2', 3, 'gave up after 3 attempt(s): billing said no'],
        ['p-3', 3, 'gave up after 3 attempt(s): billing said no'],
      ])
      expect(seen[0]?.payload).toEqual({ id: 'p-1' })
      expect(await mq.replay(dlq).pending()).toBe(4)
      expect(await idsIn(probe, dlq)).toEqual(['p-1', 'p-2', 'p-3', 'p-4'])
    })

    describe('on a quorum queue, which puts a message given back behind the others', () => {
      let source: string
      let target: string

      beforeEach(async () => {
        source = uniqueName('replay.quorum')
        target = uniqueName('replay.quorum.into')
        queues.push(source, target)
        await mq.applyTopology(Topology.define().queue(source).queue(target))
        for (let i = 1; i <= 8; i++) {
          const { body, properties } = deadLettered(`q-${i}`)
          await probe.sendRaw(source, body, properties)
        }
      })

      it('peeks at its head and leaves every message in its order', async () => {
        const returns: GiveBack[] = []
        const seen = await mq.replay(source).peek(2, { onReturned: (r) => returns.push(r) })
        expect(seen.map((m) => m.envelope.id)).toEqual(['q-1', 'q-2'])
        // The first goes back twice (once to learn where the queue puts it); a queue that puts it
        // behind the others goes round whole: 8, and the first again.
        expect(returns).toHaveLength(1)
        expect(returns[0]?.returned).toBe(returns[0]?.cycled ? 9 : 3)
        expect(await idsIn(probe, source)).toEqual(
          Array.from({ length: 8 }, (_, i) => `q-${i + 1}`),
        )
      })

      it('leaves the messages a filtered replay passes over in their order', async () => {
        const even = (message: ReplayMessage): boolean =>
          Number(message.envelope.id.slice(2)) % 2 === 0
        expect(await mq.replay(source).into(target).replay(Infinity, even)).toBe(4)
        expect(await idsIn(probe, source)).toEqual(['q-1', 'q-3', 'q-5', 'q-7'])
        expect(await idsIn(probe, target)).toEqual(['q-2', 'q-4', 'q-6', 'q-8'])
      })

      it('leaves the rest in its order when a filtered replay stops at its limit', async () => {
        const even = (message: ReplayMessage): boolean =>
          Number(message.envelope.id.slice(2)) % 2 === 0
        expect(await mq.replay(source).into(target).replay(1, even)).toBe(1)
        expect(await idsIn(probe, source)).toEqual([
          'q-1',
          'q-3',
          'q-4',
          'q-5',
          'q-6',
          'q-7',
          'q-8',
        ])
        expect(await idsIn(probe, target)).toEqual(['q-2'])
      })
    })

    it('refuses a replay into itself, and a replay of a source with no .dlq or .parked and no target', async () => {
      expect(() => mq.replay(dlq).into(dlq)).toThrow(ConfigurationError)
      expect(() => mq.replay(dlq).into(dlq)).toThrow(/into itself/)
      await expect(mq.replay(queue).replayAll()).rejects.toThrow(/\.into\(queue\)/)
      expect(await mq.replay(queue).pending()).toBe(0)
      expect(mq.replay(`${queue}.parked`).target).toBe(queue)
    })
  })
}
