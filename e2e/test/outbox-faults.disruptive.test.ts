import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AmqpAdmin } from '../../test-support/amqp-admin.js'
import {
  LOCK_WAIT_TIMEOUT,
  closeAllConnections,
  holdBrokerFaultLock,
  type HeldLock,
} from '../../test-support/broker-faults.js'
import { eventually, AMQP_URL, requirePostgres, requireRabbit } from '@acemq/testing'
import { OutboxWorld } from './outbox-world.js'
import { ensurePostgresRunning, hasLocalPostgres, stopPostgres } from './postgres-faults.js'

const ready = (await requireRabbit()) && (await requirePostgres())

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

describe.runIf(ready)(
  'the transactional outbox through a Postgres restart and dropped connections',
  () => {
    let lock: HeldLock | undefined
    let world: OutboxWorld | undefined

    beforeAll(async () => {
      if (!hasLocalPostgres()) {
        throw new Error('this run restarts Postgres, so it needs the local cluster (pg_ctlcluster)')
      }
      lock = await holdBrokerFaultLock()
      world = await OutboxWorld.create(AMQP_URL)
    }, LOCK_WAIT_TIMEOUT + 60_000)

    afterAll(async () => {
      await ensurePostgresRunning()
      if (world !== undefined) {
        await world.close()
        const admin = await AmqpAdmin.open()
        await admin.deleteQueues(
          world.handledQueue,
          `${world.handledQueue}.dlq`,
          `${world.handledQueue}.parked`,
          world.auditQueue,
        )
        await admin.channel.deleteExchange(world.exchange).catch(() => undefined)
        await admin.close()
      }
      await lock?.release()
    }, 120_000)

    it('handles every order exactly once, losing none, while orders keep coming', async () => {
      const w = world as OutboxWorld
      const relay = w.startRelay('faults', { BATCH: '25', LEASE: '3000', POLL: '50' })
      await relay.waitFor(/^READY$/, 30_000)
      const STAGE = 300

      // Calm first.
      await w.placeOrders(STAGE)
      await eventually(async () => (await w.handledCount()) === STAGE, 60_000, 'the first orders')

      // Postgres stops while orders are being placed and relayed, then comes back.
      const errorsBefore = relay.lines.filter((l) => l.startsWith('ERROR')).length
      const placing = w.placeOrders(STAGE)
      await sleep(300)
      try {
        await stopPostgres()
        await eventually(
          () => relay.lines.filter((l) => l.startsWith('ERROR')).length > errorsBefore,
          30_000,
          'the relay meeting the stopped database',
        )
        await sleep(1_000)
      } finally {
        await ensurePostgresRunning()
      }
      await placing
      await eventually(
        async () => (await w.handledCount()) === 2 * STAGE,
        90_000,
        'orders after the restart',
      )

      // Every connection to the broker drops (relay, consumers) while orders are placed.
      const reconnectsBefore = relay.lines.filter((l) => l === 'EVENT reconnected').length
      const placingMore = w.placeOrders(STAGE)
      await sleep(200)
      await closeAllConnections('acemq outbox fault test')
      await eventually(
        () => relay.lines.filter((l) => l === 'EVENT reconnected').length > reconnectsBefore,
        30_000,
        'the relay reconnecting',
      )
      await placingMore
      await eventually(
        async () => (await w.handledCount()) === 3 * STAGE,
        90_000,
        'every order handled',
      )
      await eventually(
        async () => (await w.outbox.pendingCount()) === 0,
        60_000,
        'the outbox empty',
      )

      const figures = await w.figures()
      console.log(
        `outbox through a Postgres restart and dropped connections: ${JSON.stringify(figures)}`,
      )
      expect(figures.orders).toBe(3 * STAGE)
      expect(figures.handled).toBe(3 * STAGE)
      expect(figures.handledTwice).toBe(0)
      expect(figures.lost).toBe(0)
      expect(figures.delivered).toBe(3 * STAGE + figures.duplicates)
      expect(await w.outbox.retired()).toEqual([])
    }, 400_000)
  },
)
