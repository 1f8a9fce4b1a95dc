import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { printAccounting } from '../../../e2e/test/accounting.js'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import { AMQP_URL, requireRabbit, uniqueName } from '@acemq/testing'
import { TcpFaultProxy } from '../../../test-support/tcp-fault-proxy.js'
import type { FrameCut } from '../../../test-support/tcp-fault-proxy.js'
import { LOCK_WAIT_TIMEOUT, holdBrokerFaultLock } from './support/broker.js'
import { publishUntilConfirmed, tally } from './support/counting.js'
import { Harness, eventually, message, nextEvent } from './support/harness.js'

const hasRabbit = await requireRabbit()

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

describe.runIf(hasRabbit)('AmqpTransport through a network that misbehaves', () => {
  const harness = new Harness()
  let vhost: BrokerVhost | undefined
  let proxy: TcpFaultProxy | undefined
  let releaseLock: (() => Promise<void>) | undefined

  beforeAll(async () => {
    releaseLock = await holdBrokerFaultLock()
    vhost = await BrokerVhost.create('acemq-network')
    const broker = new URL(AMQP_URL)
    proxy = await TcpFaultProxy.start(broker.hostname, Number(broker.port || 5672))
    harness.url = proxy.urlFor(vhost.url)
  }, LOCK_WAIT_TIMEOUT)

  afterEach(async () => {
    await harness.closeAll()
    proxy?.setLatency(0)
    proxy?.setLoss(0)
  })

  afterAll(async () => {
    await proxy?.close()
    await vhost?.delete()
    await releaseLock?.()
  })

  it('notices a broker that stops answering without closing within two heartbeat intervals, and recovers', async () => {
    const heartbeatMs = 1_000
    const noticed: { at: number; text: string }[] = []
    const transport = harness.create({
      connectionName: 'acemq-stall',
      heartbeat: heartbeatMs,
      recovery: { initialDelay: 50, maxDelay: 500 },
      logger: { warn: (line) => noticed.push({ at: performance.now(), text: line }) },
    })
    await transport.connect()
    const queue = uniqueName('stall')
    await transport.declare([
      { kind: 'queue', name: queue, type: 'classic', durable: true, arguments: {} },
    ])
    const consumed = tally()
    await transport.consume(queue, { prefetch: 10 }, (delivery) => consumed.onDelivery(delivery))

    const rows: [string, string | number][] = []
    const rounds = 3
    let slowest = 0
    for (let round = 1; round <= rounds; round++) {
      noticed.length = 0
      const reconnected = nextEvent(transport, 'reconnected', 15_000)
      const stalledAt = performance.now()
      expect(proxy?.stall()).toBe(2)
      const disconnected = await nextEvent(transport, 'disconnected', 10_000)
      expect(disconnected.error?.message).toMatch(/nothing arrived from the broker for \d+ ms/)
      await eventually(
        () => noticed.filter((line) => /nothing arrived/.test(line.text)).length === 2,
        5_000,
        'both connections noticed the silence',
      )
      const detections = noticed
        .filter((line) => /nothing arrived/.test(line.text))
        .map((line) => line.at - stalledAt)
      await reconnected
      // 'reconnected' may come from the connection that noticed first, back before the other
      // noticed: it counts once both are open again.
      await eventually(() => transport.state.open, 15_000, 'both connections open again')
      const recoveredMs = performance.now() - stalledAt
      for (const ms of detections) expect(ms).toBeLessThanOrEqual(2 * heartbeatMs)
      slowest = Math.max(slowest, ...detections)
      rows.push([
        `round ${round}: noticed (publish, consume), recovered (ms)`,
        `${detections.map((ms) => ms.toFixed(0)).join(', ')}; ${recoveredMs.toFixed(0)}`,
      ])
      await transport.publish(message(queue, `after stall ${round}`))
      await eventually(() => consumed.counts.has(`after stall ${round}`), 10_000, 'a delivery')
    }
    rows.push([
      'slowest notice (ms), limit 2 heartbeats',
      `${slowest.toFixed(0)} / ${2 * heartbeatMs}`,
    ])
    printAccounting('a broker that stops answering (heartbeat 1 s, 3 stalls)', rows)
  }, 60_000)

  it('loses and duplicates no confirmed message with 200 ms latency each way and 5 % of segments retransmitted', async () => {
    proxy?.setLatency(200)
    proxy?.setLoss(0.05, 200)
    const heldBefore = proxy?.held ?? 0
    const transport = await harness.open({ connectionName: 'acemq-latency', maxUnconfirmed: 500 })
    const queue = uniqueName('latency')
    await transport.declare([
      { kind: 'queue', name: queue, type: 'quorum', durable: true, arguments: {} },
    ])
    const consumed = tally()
    await transport.consume(queue, { prefetch: 500 }, (delivery) => consumed.onDelivery(delivery))
    const ids = Array.from({ length: 2_000 }, (_, i) => `m-${i}`)
    const started = performance.now()
    const { confirmed, republished, refused } = await publishUntilConfirmed(
      transport,
      queue,
      ids,
      500,
    )
    await eventually(
      () => consumed.counts.size === confirmed.size,
      60_000,
      'every message consumed',
    )
    const seconds = (performance.now() - started) / 1_000
    await sleep(1_000) // anything delivered twice would arrive by now
    const lost = [...confirmed].filter((id) => !consumed.counts.has(id)).length
    const duplicates = consumed.deliveries - consumed.counts.size
    printAccounting('200 ms latency each way, 5 % of segments retransmitted after 200 ms', [
      ['messages published', ids.length],
      ['confirmed', confirmed.size],
      ['failed and sent again', republished + refused],
      ['consumed (distinct)', consumed.counts.size],
      ['lost', lost],
      ['duplicates', duplicates],
      ['chunks held back as lost', (proxy?.held ?? 0) - heldBefore],
      ['seconds, publish to last delivery', seconds.toFixed(1)],
    ])
    expect(confirmed.size).toBe(ids.length)
    expect(republished + refused).toBe(0)
    expect(lost).toBe(0)
    expect(duplicates).toBe(0)
    expect(consumed.redelivered).toBe(0)
    expect((proxy?.held ?? 0) - heldBefore).toBeGreaterThan(0)
    expect(transport.state.open).toBe(true)
  }, 90_000)

  it('recovers from a connection cut in the middle of a frame, each way, and loses no confirmed message', async () => {
    const transport = await harness.open({
      connectionName: 'acemq-cut',
      recovery: { initialDelay: 50, maxDelay: 500 },
    })
    const queue = uniqueName('cut')
    await transport.declare([
      { kind: 'queue', name: queue, type: 'quorum', durable: true, arguments: {} },
    ])
    const consumed = tally()
    await transport.consume(queue, { prefetch: 200 }, (delivery) => consumed.onDelivery(delivery))
    let reconnections = 0
    transport.onEvent((event) => {
      if (event.type === 'reconnected') reconnections += 1
    })
    const ids = Array.from({ length: 5_000 }, (_, i) => `c-${i}`)
    const cuts: Promise<FrameCut>[] = []
    const { confirmed, republished, refused } = await publishUntilConfirmed(
      transport,
      queue,
      ids,
      200,
      (count) => {
        const cutProxy = proxy as TcpFaultProxy
        if (count === 1_000) cuts.push(cutProxy.cutMidFrame('acemq-cut (publish)', 'to-broker'))
        if (count === 3_000) cuts.push(cutProxy.cutMidFrame('acemq-cut (consume)', 'to-client'))
      },
    )
    const [toBroker, toClient] = await Promise.all(cuts)
    await eventually(
      () => consumed.counts.size === confirmed.size,
      60_000,
      'every message consumed',
    )
    await eventually(() => transport.state.open, 10_000, 'open')
    const lost = [...confirmed].filter((id) => !consumed.counts.has(id)).length
    const duplicates = consumed.deliveries - consumed.counts.size
    printAccounting('connections cut mid-frame (publish: to the broker; consume: to the client)', [
      [
        'cut to the broker: frame type, bytes passed of',
        `${toBroker?.frameType} ${toBroker?.forwarded}/${toBroker?.frameLength}`,
      ],
      [
        'cut to the client: frame type, bytes passed of',
        `${toClient?.frameType} ${toClient?.forwarded}/${toClient?.frameLength}`,
      ],
      ['reconnections', reconnections],
      ['messages published', ids.length],
      ['confirmed', confirmed.size],
      ['lost after being written, sent again', republished],
      ['refused while recovering, sent again', refused],
      ['consumed (distinct)', consumed.counts.size],
      ['lost', lost],
      ['duplicate deliveries (redelivered flag set)', `${duplicates} (${consumed.redelivered})`],
    ])
    expect(toBroker?.connection).toBe('acemq-cut (publish)')
    expect(toClient?.connection).toBe('acemq-cut (consume)')
    expect(toBroker?.forwarded).toBeGreaterThan(0)
    expect(toBroker?.forwarded).toBeLessThan(toBroker?.frameLength ?? 0)
    expect(toClient?.forwarded).toBeLessThan(toClient?.frameLength ?? 0)
    expect(reconnections).toBe(2)
    expect(confirmed.size).toBe(ids.length)
    expect(lost).toBe(0)
    // A copy is either a publish sent again after its connection went (it may have arrived) or
    // a delivery the broker gave again after the consume connection went (its ack may not have).
    expect(duplicates).toBeLessThanOrEqual(republished + consumed.redelivered)
  }, 90_000)
})
