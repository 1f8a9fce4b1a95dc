import { AceMq } from '@acemq/core'
import { AmqpTransport } from '@acemq/transport-amqp'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { AMQP_URL, requireRabbit } from '../../../test-support/services.js'
import { acemqHealth } from '../src/index.js'
import { getJson, serve, type Served } from './serve.js'

const hasRabbit = await requireRabbit()

describe.runIf(hasRabbit)('acemqHealth (Express) on RabbitMQ', () => {
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

  it('answers 200 UP for a live connection', async () => {
    const { status, body } = await getJson(`${server.url}/acemq-health`)
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
    await mq.close()
    const { status, body } = await getJson(`${server.url}/acemq-health`)
    expect(status).toBe(503)
    expect(body.status).toBe('DOWN')
    expect(body.components['connection']).toMatchObject({ status: 'DOWN', open: 'false' })
  })

  it('never shows the password of the broker URL', async () => {
    const { username, password } = new URL(AMQP_URL)
    const text = await (await fetch(`${server.url}/acemq-health`)).text()
    expect(text).toContain('127.0.0.1')
    expect(text).toContain('***')
    expect(text).not.toContain(`${username}:${password}`)
    expect(text).not.toContain(`:${password}@`)
    if (password !== username) expect(text).not.toContain(password)
  })
})
