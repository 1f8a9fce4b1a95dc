import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { AmqpAdmin } from '../../test-support/amqp-admin.js'
import { eventually, AMQP_URL, requirePostgres, requireRabbit } from '@acemq/testing'
import { OutboxWorld, type OutboxFigures } from './outbox-world.js'

const ready = (await requireRabbit()) && (await requirePostgres())

function report(what: string, figures: OutboxFigures): void {
  console.log(`${what}: ${JSON.stringify(figures)}`)
}

describe.runIf(ready)(
  'the transactional outbox end to end (Postgres, RabbitMQ, relay processes)',
  () => {
    let world: OutboxWorld

    beforeEach(async () => {
      world = await OutboxWorld.create(AMQP_URL)
    })

    afterEach(async () => {
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
    })

    it('two relay processes on one outbox never publish one record twice: every order is delivered and handled exactly once', async () => {
      const ORDERS = 2_000
      await world.placeOrders(ORDERS)
      // Long leases: any second copy would be a lease shared by two relays. Each relay holds its
      // first batch until both hold one, so both take part however the machine schedules them
      // (on a loaded machine one relay once published all 2,000 before the other began).
      const options = { BATCH: '25', LEASE: '120000', HOLD_FIRST_BATCH: '1' }
      const relays = [world.startRelay('a', options), world.startRelay('b', options)]
      await Promise.all(relays.map((relay) => relay.waitFor(/^FIRST 25$/, 30_000)))
      for (const relay of relays) relay.send('GO')
      await eventually(
        async () => (await world.handledCount()) === ORDERS,
        60_000,
        'every order handled',
      )
      for (const relay of relays) relay.process.kill('SIGTERM')
      const done = await Promise.all(relays.map((relay) => relay.waitFor(/^DONE /, 30_000)))
      const published = done.map(
        (line) => (JSON.parse(line.slice(5)) as { published: number }).published,
      )
      const figures = await world.figures()
      report('two relays', figures)
      expect(published.every((n) => n > 0)).toBe(true)
      expect(published.reduce((a, b) => a + b, 0)).toBe(ORDERS)
      expect(figures).toEqual({
        orders: ORDERS,
        delivered: ORDERS,
        handled: ORDERS,
        handledTwice: 0,
        duplicates: 0,
        lost: 0,
      })
      expect(await world.outbox.pendingCount()).toBe(0)
    }, 120_000)

    it('a relay killed between the confirm and the mark: the next relay publishes that batch again and the idempotent consumer handles each order once', async () => {
      const ORDERS = 500
      await world.placeOrders(ORDERS)
      const doomed = world.startRelay('doomed', {
        BATCH: '40',
        LEASE: '2000',
        STALL_AFTER_CONFIRM: '3',
      })
      const stalled = await doomed.waitFor(/^STALLED /, 30_000)
      const stalledIds = JSON.parse(stalled.slice('STALLED '.length)) as string[]
      doomed.process.kill('SIGKILL')
      expect(await doomed.exited).toBe('SIGKILL')
      expect(stalledIds).toHaveLength(40)
      // The batch whose mark never happened was confirmed by the broker: delivered once and
      // still pending in the outbox — and so, the rounds being pipelined, is the batch
      // published after it, whose mark was waiting for this one.
      await eventually(
        () => stalledIds.every((id) => world.deliveries.get(id) === 1),
        10_000,
        'the stalled batch delivered once',
      )
      await new Promise((resolve) => setTimeout(resolve, 500))
      const unpublished = await world.unpublishedIds()
      const confirmedUnmarked = [...world.deliveries.keys()].filter((id) => unpublished.has(id))
      expect(stalledIds.every((id) => unpublished.has(id))).toBe(true)
      const successor = world.startRelay('successor', { BATCH: '40', LEASE: '2000' })
      await successor.waitFor(/^READY$/, 30_000)
      await eventually(
        async () => (await world.handledCount()) === ORDERS,
        60_000,
        'every order handled',
      )
      await eventually(
        () => confirmedUnmarked.every((id) => world.deliveries.get(id) === 2),
        30_000,
        'the confirmed but unmarked records published again',
      )
      await eventually(
        async () => (await world.outbox.pendingCount()) === 0,
        30_000,
        'the outbox empty',
      )
      const figures = await world.figures()
      report('relay killed between confirm and mark', figures)
      expect(figures).toEqual({
        orders: ORDERS,
        delivered: ORDERS + confirmedUnmarked.length,
        handled: ORDERS,
        handledTwice: 0,
        duplicates: confirmedUnmarked.length,
        lost: 0,
      })
    }, 120_000)
  },
)
