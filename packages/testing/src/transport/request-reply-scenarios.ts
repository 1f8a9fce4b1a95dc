import { describe, expect, it } from 'vitest'
import {
  ConsumerOptions,
  ErrorCodes,
  FatalError,
  RetryPolicy,
  Topology,
  errorCodeOf,
  type AceMq,
  type Requester,
  type Responder,
} from '@acemq/core'
import { REPLY_TO_HEADER } from '@acemq/core/spi'
import { eventually } from '../helpers/eventually.js'
import { uniqueName } from '../services/services.js'
import { type BrokerProbe, type ScenarioTarget } from './engine-scenarios.js'
import { eachScenario } from './scenario-hooks.js'

/** The code a promise rejects with (failing when it resolves). */
async function rejection(work: Promise<unknown>): Promise<unknown> {
  return work.then(
    () => {
      throw new Error('expected a rejection; it resolved')
    },
    (error: unknown) => error,
  )
}

/** The health details of the report named `prefix…`. */
async function details(mq: AceMq, prefix: string): Promise<Record<string, string> | undefined> {
  const { reports } = await mq.health()
  return reports.find((report) => report.name.startsWith(prefix))?.details
}

/**
 * Request/reply (docs/design.md §24), run against every transport: the round trip and the
 * family's wire, and each way a request can end — no responder, a timeout, an abort, a late or
 * second reply, a failing handler, an unencodable reply, shutdown — with the counters.
 */
export function requestReplyScenarios(name: string, target: ScenarioTarget): void {
  describe(`request/reply on ${name}`, () => {
    let mq: AceMq
    let probe: BrokerProbe
    let requester: Requester
    let queue: string
    const queues: string[] = []
    const responders: Responder[] = []

    eachScenario(
      target,
      queues,
      async (connection) => {
        ;({ mq, probe } = connection)
        queue = uniqueName('acemq.rpc')
        queues.push(queue)
        await mq.applyTopology(Topology.define().queueWithDeadLetter(queue))
        requester = mq.requester({ timeout: '5s' })
      },
      {
        closing: async () => {
          for (const responder of responders.splice(0)) await responder.close({ drainTimeout: 0 })
          await requester.close()
          await probe.deleteQueue(requester.replyQueue)
        },
      },
    )

    /** A responder that echoes each request once `release()` is called. */
    async function heldResponder(): Promise<() => void> {
      let release: () => void = () => undefined
      const released = new Promise<void>((resolve) => (release = resolve))
      responders.push(
        await mq.respond<number, number>(queue, {}, async (m) => {
          await released
          return m.payload
        }),
      )
      return release
    }

    it('answers a request with the handler’s return value, the request’s id as the reply’s correlation', async () => {
      responders.push(
        await mq.respond<{ a: number; b: number }, number>(queue, {}, (message) => {
          expect(message.headers[REPLY_TO_HEADER]).toBe(requester.replyQueue)
          expect(message.replyTo).toBe(requester.replyQueue)
          return message.payload.a + message.payload.b
        }),
      )
      const reply = await requester.requestMessage<{ a: number; b: number }, number>(
        '',
        queue,
        { a: 2, b: 3 },
        { id: 'sum-1' },
      )
      expect(reply.payload).toBe(5)
      expect(reply.envelope.correlation).toBe('sum-1')
      expect(reply.envelope.causation).toBe('sum-1')
      expect(requester.answered).toBe(1)
      // The responder counts once its reply is confirmed, which may be after the reply arrived.
      await eventually(() => responders[0]?.answered === 1, 5_000, 'the responder counted it')
      expect(await details(mq, 'requester:')).toMatchObject({ answered: '1', waiting: '0' })
      expect(await details(mq, `responder:${queue}`)).toMatchObject({ answered: '1' })
    })

    it('answers a foreign request that names its reply queue only in the reply-to property', async () => {
      responders.push(await mq.respond<string, string>(queue, {}, (m) => m.payload.toUpperCase()))
      const replies = uniqueName('acemq.reply.foreign')
      queues.push(replies)
      await mq.applyTopology(Topology.define().queue(replies))
      await mq.transport.publish({
        exchange: '',
        routingKey: queue,
        body: Buffer.from('"hi"'),
        headers: {},
        properties: { contentType: 'application/json', replyTo: replies, messageId: 'f-1' },
        persistent: true,
        mandatory: true,
      })
      await eventually(
        async () => (await probe.count(replies)) === 1,
        5_000,
        'probe.count(replies) is 1',
      )
      const reply = await probe.get(replies)
      expect(Buffer.from(reply?.body ?? []).toString()).toBe('"HI"')
      expect(reply?.headers['x-acemq-correlation']).toBe('f-1')
    })

    it('rejects at once with UnroutableError when no queue takes the request', async () => {
      const started = Date.now()
      const error = await rejection(requester.request('', uniqueName('acemq.rpc.nobody'), 1))
      expect(errorCodeOf(error)).toBe(ErrorCodes.UNROUTABLE)
      expect(Date.now() - started).toBeLessThan(2_000)
      expect(requester.failed).toBe(1)
      expect(requester.waiting).toBe(0)
    })

    it('rejects with RequestTimeoutError when no reply comes in time, and drops the late reply as unmatched', async () => {
      const release = await heldResponder()
      const error = await rejection(requester.request('', queue, 7, { timeout: 200 }))
      expect(errorCodeOf(error)).toBe(ErrorCodes.REQUEST_TIMEOUT)
      expect(String(error)).toMatch(/within 200 ms/)
      expect(requester.timedOut).toBe(1)
      release()
      await eventually(() => requester.unmatched === 1, 5_000, 'requester.unmatched is 1')
      expect(await details(mq, 'requester:')).toMatchObject({ timed_out: '1', unmatched: '1' })
    })

    it('rejects with an AbortError when the signal fires, and a reply after that is unmatched', async () => {
      const release = await heldResponder()
      const controller = new AbortController()
      const waiting = rejection(requester.request('', queue, 1, { signal: controller.signal }))
      await eventually(() => requester.waiting === 1, 5_000, 'requester.waiting is 1')
      controller.abort()
      expect((await waiting) as Error).toHaveProperty('name', 'AbortError')
      release()
      await eventually(() => requester.unmatched === 1, 5_000, 'requester.unmatched is 1')
      expect(requester.answered).toBe(0)
    })

    it('gives the requester an error reply naming the failure once the responder gives up, not a timeout', async () => {
      responders.push(
        await mq.respond<number, number>(
          queue,
          { consumer: ConsumerOptions.defaults().withRetry(RetryPolicy.fixed(2, '10ms')) },
          () => {
            throw new RangeError('price list missing for sku a-1')
          },
        ),
      )
      const started = Date.now()
      const error = await rejection(requester.request('', queue, 1))
      expect(errorCodeOf(error)).toBe(ErrorCodes.RESPONDER_FAILED)
      expect(String(error)).toMatch(/RangeError: price list missing for sku a-1/)
      expect(Date.now() - started).toBeLessThan(4_000)
      // The request itself followed the retry policy: two attempts, then the dead-letter queue.
      await eventually(
        async () => (await probe.count(`${queue}.dlq`)) === 1,
        5_000,
        'one request in the dead-letter queue',
      )
      expect(requester.unmatched).toBe(0)
    })

    it('by default, tells the requester at once when the handler throws and dead-letters the request', async () => {
      let calls = 0
      responders.push(
        await mq.respond(queue, {}, () => {
          calls++
          throw new TypeError('quote.sku is undefined')
        }),
      )
      const error = await rejection(requester.request('', queue, 1))
      expect(String(error)).toMatch(/TypeError: quote\.sku is undefined/)
      await eventually(
        async () => (await probe.count(`${queue}.dlq`)) === 1,
        5_000,
        'dead-lettered',
      )
      expect(calls).toBe(1)
    })

    it('sends no error reply while the engine still retries (consumer options without a policy retry forever)', async () => {
      responders.push(
        await mq.respond(queue, { consumer: ConsumerOptions.defaults() }, () => {
          throw new Error('billing is down')
        }),
      )
      const error = await rejection(requester.request('', queue, 1, { timeout: 300 }))
      expect(errorCodeOf(error)).toBe(ErrorCodes.REQUEST_TIMEOUT)
      expect(requester.unmatched).toBe(0)
    })

    it('answers a FatalError at the first attempt', async () => {
      responders.push(
        await mq.respond(
          queue,
          { consumer: ConsumerOptions.defaults().withRetry(RetryPolicy.fixed(5, '1s')) },
          () => {
            throw new FatalError('no such customer')
          },
        ),
      )
      const error = await rejection(requester.request('', queue, 1))
      expect(String(error)).toMatch(/FatalError: no such customer/)
    })

    it('tells the requester a reply cannot be encoded, counts it unanswerable and sets the request aside', async () => {
      responders.push(await mq.respond(queue, {}, () => ({ big: 10n })))
      const error = await rejection(requester.request('', queue, 1))
      expect(errorCodeOf(error)).toBe(ErrorCodes.RESPONDER_FAILED)
      expect(String(error)).toMatch(/the reply cannot be encoded/)
      await eventually(
        async () => (await probe.count(`${queue}.dlq`)) === 1,
        5_000,
        'one request in the dead-letter queue',
      )
      expect(responders[0]?.unanswerable).toBe(1)
      expect(responders[0]?.answered).toBe(0)
      expect(await details(mq, `responder:${queue}`)).toMatchObject({ unanswerable: '1' })
    })

    it('answers a caller once when its request is handled twice: the second reply is unmatched', async () => {
      let handled = 0
      responders.push(
        await mq.respond<number, number>(queue, {}, (m) => {
          handled++
          return m.payload * 10
        }),
      )
      const first = requester.requestMessage<number, number>('', queue, 4, { id: 'twice-1' })
      expect((await first).payload).toBe(40)
      // The same request again, as a redelivery after a lost ack would bring it.
      await probe.sendRaw(queue, Buffer.from('4'), {
        contentType: 'application/json',
        messageId: 'twice-1',
        headers: { 'x-acemq-id': 'twice-1', [REPLY_TO_HEADER]: requester.replyQueue },
      })
      await eventually(() => requester.unmatched === 1, 5_000, 'requester.unmatched is 1')
      expect(handled).toBe(2)
      expect(requester.answered).toBe(1)
    })

    it('never hands a reply meant for a requester that restarted to its successor', async () => {
      let release: () => void = () => undefined
      const released = new Promise<void>((resolve) => (release = resolve))
      let calls = 0
      responders.push(
        await mq.respond<string, string>(queue, {}, async (m) => {
          if (++calls === 1) await released
          return `for ${m.payload}`
        }),
      )
      const before = mq.requester()
      const lost = rejection(before.request('', queue, 'the first requester'))
      await eventually(() => calls === 1, 5_000, 'the first request is being handled')
      await before.close() // as a process restarting would: its caller is told, its queue stays
      expect(errorCodeOf(await lost)).toBe(ErrorCodes.CLOSED)
      const after = mq.requester()
      try {
        release()
        expect(await after.request('', queue, 'the second requester')).toBe(
          'for the second requester',
        )
        // The stale reply went to the first requester's queue, not to the second's caller.
        await eventually(
          async () => (await probe.count(before.replyQueue)) === 1,
          5_000,
          'the stale reply waits in the old queue',
        )
        expect(after.answered).toBe(1)
        expect(after.unmatched).toBe(0)
      } finally {
        await after.close()
        await probe.deleteQueue(before.replyQueue)
        await probe.deleteQueue(after.replyQueue)
      }
    })

    it('counts a request whose reply address no longer routes unanswerable, and acks it', async () => {
      const responder = await mq.respond(queue, {}, () => 'too late')
      responders.push(responder)
      await probe.sendRaw(queue, Buffer.from('1'), {
        contentType: 'application/json',
        messageId: 'gone-1',
        headers: { [REPLY_TO_HEADER]: uniqueName('acemq.reply.gone') },
      })
      await eventually(() => responder.unanswerable === 1, 5_000, 'counted unanswerable')
      expect(responder.answered).toBe(0)
      await responder.close()
      expect(await probe.count(queue)).toBe(0)
      expect(await probe.count(`${queue}.dlq`)).toBe(0)
    })

    it('counts a request with no reply address unanswerable, and still handles it', async () => {
      let handled = 0
      responders.push(await mq.respond(queue, {}, () => ++handled))
      await mq.publisher('', queue).send('fire and forget')
      await eventually(
        () => responders[0]?.unanswerable === 1,
        5_000,
        'responders[0]?.unanswerable is 1',
      )
      expect(handled).toBe(1)
      expect(await probe.count(`${queue}.dlq`)).toBe(0)
    })

    it('settles every waiting request with ClosedError when the connection closes', async () => {
      responders.push(
        await mq.respond(
          queue,
          {},
          (_m, { signal }) =>
            new Promise((_resolve, reject) =>
              signal.addEventListener('abort', () => reject(signal.reason)),
            ),
        ),
      )
      const waiting = [1, 2].map((n) => rejection(requester.request('', queue, n)))
      await eventually(() => requester.waiting === 2, 5_000, 'requester.waiting is 2')
      await mq.close({ drainTimeout: 0 })
      for (const error of await Promise.all(waiting))
        expect(errorCodeOf(error)).toBe(ErrorCodes.CLOSED)
      expect(requester.waiting).toBe(0)
    })

    it('refuses bad input naming the argument', async () => {
      await expect(requester.request('', queue, 1, { timeout: 0 })).rejects.toThrow(
        /request\(options\.timeout\) must be more than 0; got 0/,
      )
      await expect(requester.request('', queue, 1, { timeout: -5 })).rejects.toThrow(
        /request\(options\.timeout\)/,
      )
      await expect(requester.request('', queue, 10n)).rejects.toThrow(
        /request\(payload\): the application\/json codec refused it/,
      )
      expect(() => mq.requester({ timeout: Number.NaN })).toThrow(/requester\(options\.timeout\)/)
    })
  })
}
