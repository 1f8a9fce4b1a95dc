import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { ErrorCodes, errorCodeOf, type ErrorCode } from '@acemq/core'
import { type Declaration, type OutgoingMessage, type Transport } from '@acemq/core/spi'
import { uniqueName } from '../services/services.js'

/** What the suite needs from each transport: a new one, not yet connected. */
export interface ErrorCodeTarget {
  /** A new transport on a broker (or virtual host) this run may fill with fresh names. */
  create(): Transport
}

/** The code the promise rejects with (failing the test when it resolves). */
async function codeOf(work: Promise<unknown>): Promise<ErrorCode | undefined> {
  const outcome = await work.then(
    () => ({ resolved: true as const }),
    (error: unknown) => ({ resolved: false as const, error }),
  )
  if (outcome.resolved) throw new Error('expected a rejection; it resolved')
  return errorCodeOf(outcome.error)
}

function message(exchange: string, routingKey: string, mandatory = false): OutgoingMessage {
  return {
    exchange,
    routingKey,
    body: Buffer.from('x'),
    headers: {},
    properties: {},
    persistent: true,
    mandatory,
  }
}

function queue(name: string, args: Record<string, unknown> = {}): Declaration {
  return { kind: 'queue', name, type: 'classic', durable: true, arguments: args }
}

/**
 * One failure, one code, on every transport: the same assertions run on `InMemoryTransport`
 * and on `AmqpTransport` against RabbitMQ, so an application (and the engine) that matches on
 * `ErrorCodes` behaves the same whichever it runs on (docs/errors.md).
 */
export function errorCodeParity(name: string, target: ErrorCodeTarget): void {
  describe(`error codes on ${name}`, () => {
    let t: Transport

    beforeEach(async () => {
      t = target.create()
      await t.connect()
    })

    afterEach(async () => {
      await t.close()
    })

    const fresh = (kind: string): string => uniqueName(`codes.${kind}`)

    it('consuming a queue that does not exist is ACEMQ_NOT_FOUND, and the transport goes on', async () => {
      const missing = fresh('missing')
      expect(await codeOf(t.consume(missing, { prefetch: 1 }, () => undefined))).toBe(
        ErrorCodes.NOT_FOUND,
      )
      const q = fresh('q')
      await t.declare([queue(q)])
      const subscription = await t.consume(q, { prefetch: 1 }, () => undefined)
      await subscription.close()
    })

    it('taking from or counting a queue that does not exist is ACEMQ_NOT_FOUND', async () => {
      expect(await codeOf(t.getOne?.(fresh('missing')) ?? Promise.resolve())).toBe(
        ErrorCodes.NOT_FOUND,
      )
      expect(await codeOf(t.queueLength?.(fresh('missing')) ?? Promise.resolve())).toBe(
        ErrorCodes.NOT_FOUND,
      )
    })

    it('a declaration the broker refuses (it exists otherwise, or an argument is invalid) is ACEMQ_DECLARATION_FAILED', async () => {
      const q = fresh('q')
      await t.declare([queue(q, { 'x-message-ttl': 100 })])
      expect(await codeOf(t.declare([queue(q, { 'x-message-ttl': 200 })]))).toBe(
        ErrorCodes.DECLARATION_FAILED,
      )
      expect(await codeOf(t.declare([queue(fresh('bad'), { 'x-message-ttl': -1 })]))).toBe(
        ErrorCodes.DECLARATION_FAILED,
      )
    })

    it('a declaration that is not one is ACEMQ_CONFIGURATION, before anything is sent', async () => {
      expect(await codeOf(t.declare([queue('')]))).toBe(ErrorCodes.CONFIGURATION)
    })

    it('a publish to an exchange that does not exist is ACEMQ_EXCHANGE_NOT_FOUND, and the next one goes through', async () => {
      expect(await codeOf(t.publish(message(fresh('no-exchange'), 'k')))).toBe(
        ErrorCodes.EXCHANGE_NOT_FOUND,
      )
      const q = fresh('q')
      await t.declare([queue(q)])
      await t.publish(message('', q, true))
    })

    it('a mandatory publish no queue takes is ACEMQ_UNROUTABLE', async () => {
      expect(await codeOf(t.publish(message('', fresh('nowhere'), true)))).toBe(
        ErrorCodes.UNROUTABLE,
      )
    })

    it('after close: a publish is ACEMQ_PUBLISH_FAILED; a consume, a get and a declaration are ACEMQ_CLOSED', async () => {
      const q = fresh('q')
      await t.declare([queue(q)])
      await t.close()
      expect(await codeOf(t.publish(message('', q)))).toBe(ErrorCodes.PUBLISH_FAILED)
      expect(await codeOf(t.consume(q, { prefetch: 1 }, () => undefined))).toBe(ErrorCodes.CLOSED)
      expect(await codeOf(t.getOne?.(q) ?? Promise.resolve())).toBe(ErrorCodes.CLOSED)
      expect(await codeOf(t.declare([queue(q)]))).toBe(ErrorCodes.CLOSED)
    })

    it('before connect: a publish is ACEMQ_PUBLISH_FAILED, a consume ACEMQ_NOT_CONNECTED', async () => {
      const unconnected = target.create()
      try {
        expect(await codeOf(unconnected.publish(message('', fresh('q'))))).toBe(
          ErrorCodes.PUBLISH_FAILED,
        )
        expect(
          await codeOf(unconnected.consume(fresh('q'), { prefetch: 1 }, () => undefined)),
        ).toBe(ErrorCodes.NOT_CONNECTED)
      } finally {
        await unconnected.close()
      }
    })
  })
}
