import amqplib from 'amqplib'
import type { ChannelModel } from 'amqplib'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { AceMq, type HealthReport } from '@acemq/core'
import { AMQP_URL, requireRabbit } from '@acemq/testing'
import { AmqpTransport } from '../src/index.js'

const hasRabbit = await requireRabbit()

function connectionReport(reports: readonly HealthReport[]): HealthReport | undefined {
  return reports.find((report) => report.name === 'connection')
}

// The broker's connection.blocked / connection.unblocked, as amqplib hands them on, without a
// memory alarm: a broker-wide alarm belongs in the disruptive project, this does not.
describe.runIf(hasRabbit)('health while the broker blocks and unblocks the connection', () => {
  afterEach(() => {
    vi.restoreAllMocks()
  })

  it('shows blockedReason while blocked and drops it, UP again, once the broker unblocks', async () => {
    const models: ChannelModel[] = []
    const connect = amqplib.connect.bind(amqplib)
    vi.spyOn(amqplib, 'connect').mockImplementation(async (...args: Parameters<typeof connect>) => {
      const model = await connect(...args)
      models.push(model)
      return model
    })
    const mq = await AceMq.connect(
      new AmqpTransport(AMQP_URL, { connectionName: 'acemq-blocked-health' }),
    )
    try {
      expect(models.length).toBeGreaterThan(0)
      for (const model of models) model.emit('blocked', 'low on memory')
      const blocked = connectionReport((await mq.health()).reports)
      expect(blocked?.status).toBe('UP')
      expect(blocked?.details).toMatchObject({ blocked: 'true', blockedReason: 'low on memory' })

      for (const model of models) model.emit('unblocked')
      const unblocked = connectionReport((await mq.health()).reports)
      expect(unblocked?.status).toBe('UP')
      expect(unblocked?.details?.['blocked']).toBe('false')
      expect(unblocked?.details).not.toHaveProperty('blockedReason')
      expect(mq.transport.state.blockedReason).toBeUndefined()
    } finally {
      await mq.close({ drainTimeout: 0 })
    }
  })
})
