import { afterEach, describe, expect, it } from 'vitest'
import { AceMqError, ErrorCodes, errorCodeOf } from '@acemq/core'
import { AMQP_URL, requireRabbit } from '@acemq/testing'
import { resolveNodes } from '../../src/internal/endpoint.js'
import { ManagedConnection, type ConnectionHooks } from '../../src/internal/managed-connection.js'

const hooks: ConnectionHooks = {
  setup: async () => undefined,
  up: () => undefined,
  down: () => undefined,
  blocked: () => undefined,
  unblocked: () => undefined,
  warn: () => undefined,
}

function connection(): ManagedConnection {
  const nodes = resolveNodes(AMQP_URL, {
    heartbeatSeconds: 10,
    heartbeatExplicit: false,
    connectionName: 'managed-connection test',
    connectTimeoutMs: 5_000,
    socketOptions: {},
  })
  return new ManagedConnection('consume', nodes, 'in-order', undefined, 5_000, hooks)
}

const hasRabbit = await requireRabbit()

const opened: ManagedConnection[] = []

afterEach(async () => {
  await Promise.all(opened.splice(0).map((c) => c.close()))
})

describe.runIf(hasRabbit)('ManagedConnection.open', () => {
  it('refuses a second open, while the first is connecting or once it is open, as ACEMQ_INVALID_STATE', async () => {
    const managed = connection()
    opened.push(managed)
    const first = managed.open()
    const whileConnecting = await managed.open().catch((error: unknown) => error)
    expect(whileConnecting).toBeInstanceOf(AceMqError)
    expect(errorCodeOf(whileConnecting)).toBe(ErrorCodes.INVALID_STATE)
    expect((whileConnecting as Error).message).toBe(
      'the consume connection was already opened (it is connecting): open() is called once',
    )
    await first
    expect(managed.isOpen).toBe(true)
    const whileOpen = await managed.open().catch((error: unknown) => error)
    expect(errorCodeOf(whileOpen)).toBe(ErrorCodes.INVALID_STATE)
    expect((whileOpen as Error).message).toContain('(it is open)')
    // The refused call changed nothing: the connection is still the one opened first.
    expect(managed.isOpen).toBe(true)
  })
})
