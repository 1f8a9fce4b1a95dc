import { AceMq, ConnectionBlockedError } from '@acemq/core'
import {
  AMQP_URL,
  getJson,
  uniqueName,
  type HealthBody,
  type HealthEndpointFixture,
  type ServedHealth,
} from '@acemq/testing'
import { AmqpTransport } from '@acemq/transport-amqp'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { clearMemoryAlarm, raiseMemoryAlarm, withBrokerFault } from './broker-faults.js'

// The health endpoint contract's RabbitMQ half: it needs this repository's broker helpers
// (the memory alarm), so it stays here; the transport-neutral contract is in @acemq/testing.

/** A connection to the test broker served through `fixture` for each test of the suite. */
function servedOnRabbit(fixture: HealthEndpointFixture): { mq: AceMq; server: ServedHealth } {
  const live = {} as { mq: AceMq; server: ServedHealth }
  beforeEach(async () => {
    live.mq = await AceMq.connect(new AmqpTransport(AMQP_URL))
    live.server = await fixture.serve(live.mq)
  })
  afterEach(async () => {
    await live.server.close()
    await live.mq.close({ drainTimeout: 0 })
  })
  return live
}

/** The contract on a real connection: `available` is `await requireRabbit()`. */
export function healthEndpointOnRabbit(
  name: string,
  fixture: HealthEndpointFixture,
  available: boolean,
): void {
  describe.runIf(available)(`${name} on RabbitMQ`, () => {
    const live = servedOnRabbit(fixture)

    it('answers 200 UP for a live connection', async () => {
      const { status, body } = await getJson(`${live.server.url}/acemq-health`)
      expect(status).toBe(200)
      expect(body.status).toBe('UP')
      expect(body.components['connection']).toMatchObject({
        status: 'UP',
        open: 'true',
        blocked: 'false',
        inFlight: '0',
        held: '0',
      })
      expect(body.components['connection']?.['transport']).toMatch(/^amqp /)
      expect(body.components['connection']).not.toHaveProperty('blockedReason')
    })

    it('answers 503 DOWN once the connection is closed', async () => {
      await live.mq.close()
      const { status, body } = await getJson(`${live.server.url}/acemq-health`)
      expect(status).toBe(503)
      expect(body.status).toBe('DOWN')
      expect(body.components['connection']).toMatchObject({ status: 'DOWN', open: 'false' })
    })

    it('never shows the password of the broker URL', async () => {
      const { username, password } = new URL(AMQP_URL)
      const text = await (await fetch(`${live.server.url}/acemq-health`)).text()
      expect(text).toContain('127.0.0.1')
      expect(text).toContain('***')
      expect(text).not.toContain(`${username}:${password}`)
      expect(text).not.toContain(`:${password}@`)
      if (password !== username) expect(text).not.toContain(password)
    })
  })
}

/**
 * Polls `url` until `ready(body)` holds, calling `meanwhile()` after every answer that is not
 * ready yet; fails with the last answer after `timeoutMs`.
 */
async function waitForHealth(
  url: string,
  ready: (body: HealthBody) => boolean,
  meanwhile: () => void = () => undefined,
  timeoutMs = 20_000,
): Promise<{ status: number; body: HealthBody }> {
  const deadline = Date.now() + timeoutMs
  let last: { status: number; body: HealthBody } | undefined
  while (Date.now() < deadline) {
    last = await getJson(url)
    if (ready(last.body)) return last
    meanwhile()
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  throw new Error(`the endpoint never got there; it last said ${JSON.stringify(last)}`)
}

const isBlocked = (body: HealthBody): boolean =>
  body.components['connection']?.['blocked'] === 'true'
const isUnblocked = (body: HealthBody): boolean =>
  body.components['connection']?.['blocked'] === 'false'

/**
 * The endpoint while RabbitMQ's memory alarm blocks publishing: for a `*.disruptive.test.ts`
 * file (it raises the broker-wide alarm inside `withBrokerFault`).
 */
export function healthEndpointUnderMemoryAlarm(
  name: string,
  fixture: HealthEndpointFixture,
  available: boolean,
): void {
  describe.runIf(available)(`${name} while RabbitMQ raises its memory alarm`, () => {
    const live = servedOnRabbit(fixture)

    it('answers 200 UP with blocked "true" and the broker\'s reason, and clears after', async () => {
      const url = `${live.server.url}/acemq-health`
      const nowhere = live.mq.publisher('', uniqueName('acemq.health.nowhere'), {
        allowUnroutable: true,
      })
      // Publishes the broker holds back settle once the alarm clears: confirmed, or refused at
      // once when the connection was already known to be blocked.
      const sends: Promise<unknown>[] = []
      const nudge = (): void => {
        sends.push(nowhere.send({ nudge: sends.length }).catch((error: unknown) => error))
      }

      await withBrokerFault(async () => {
        try {
          await raiseMemoryAlarm()
          // On an alarm RabbitMQ marks connections "blocking", and blocks one (sending
          // connection.blocked) only when it next publishes: publish until it does.
          const blocked = await waitForHealth(url, isBlocked, nudge)
          expect(blocked.status).toBe(200)
          expect(blocked.body.status).toBe('UP')
          expect(blocked.body.components['connection']).toMatchObject({
            status: 'UP',
            open: 'true',
            blocked: 'true',
            blockedReason: 'low on memory',
          })
          await expect(nowhere.send({ while: 'blocked' })).rejects.toBeInstanceOf(
            ConnectionBlockedError,
          )
        } finally {
          await clearMemoryAlarm()
        }
        const cleared = await waitForHealth(url, isUnblocked)
        expect(cleared.status).toBe(200)
        expect(cleared.body.status).toBe('UP')
        expect(cleared.body.components['connection']).not.toHaveProperty('blockedReason')
      })

      for (const result of await Promise.all(sends)) {
        if (result !== undefined) expect(result).toBeInstanceOf(ConnectionBlockedError)
      }
      await nowhere.send({ after: 'alarm' })
    })
  })
}
