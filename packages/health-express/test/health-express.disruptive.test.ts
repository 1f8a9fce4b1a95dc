import { AceMq, ConnectionBlockedError } from '@acemq/core'
import { AmqpTransport } from '@acemq/transport-amqp'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  clearMemoryAlarm,
  raiseMemoryAlarm,
  withBrokerFault,
} from '../../../test-support/broker-faults.js'
import { AMQP_URL, requireRabbit, uniqueName } from '../../../test-support/services.js'
import { acemqHealth } from '../src/index.js'
import { getJson, serve, type HealthBody, type Served } from './serve.js'

const hasRabbit = await requireRabbit()

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

describe.runIf(hasRabbit)('acemqHealth (Express) while RabbitMQ raises its memory alarm', () => {
  let mq: AceMq
  let server: Served

  beforeEach(async () => {
    mq = await AceMq.connect(new AmqpTransport(AMQP_URL))
    server = await serve((app) => app.use(acemqHealth(mq)))
  })

  afterEach(async () => {
    await server.close()
    await mq.close({ drainTimeout: 0 })
  })

  it('answers 200 UP with blocked "true" and the broker\'s reason, and clears after', async () => {
    const url = `${server.url}/acemq-health`
    const nowhere = mq.publisher('', uniqueName('acemq.health.nowhere'), { allowUnroutable: true })
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
