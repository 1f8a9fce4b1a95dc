import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AceMq, ReplayStoppedError, Topology } from '@acemq/core'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import { TcpFaultProxy } from '../../../test-support/tcp-fault-proxy.js'
import { eventually, requireRabbit, uniqueName } from '@acemq/testing'
import { AmqpTransport } from '../src/index.js'

const hasRabbit = await requireRabbit()

// Only the replaying connection goes through the proxy: cutting it disturbs no one else.
describe.runIf(hasRabbit)('a replay whose connection is lost half way', () => {
  let vhost: BrokerVhost
  let admin: AmqpAdmin
  beforeAll(async () => {
    vhost = await BrokerVhost.create('acemq-replay-cut')
    admin = await AmqpAdmin.open(vhost.url)
  })
  afterAll(async () => {
    await admin?.close()
    await vhost?.delete()
  })

  it('rejects saying how many it had moved, and loses none of the rest', async () => {
    const queue = uniqueName('orders')
    const total = 3_000
    const proxy = await TcpFaultProxy.start('127.0.0.1', Number(new URL(vhost.url).port || 5672))
    const mq = await AceMq.connect(
      new AmqpTransport(proxy.urlFor(vhost.url), { connectionName: 'acemq-replay-cut' }),
    )
    try {
      await mq.applyTopology(Topology.define().queueWithDeadLetter(queue))
      for (let i = 0; i < total; i++) {
        admin.channel.sendToQueue(`${queue}.dlq`, Buffer.from('{}'), {
          persistent: true,
          headers: { 'x-acemq-id': `m-${i}` },
        })
      }
      await admin.channel.waitForConfirms()
      let cut = false
      const stopped = await mq
        .replay(`${queue}.dlq`)
        .replayAll({
          onProgress: ({ moved }) => {
            if (moved >= 1_000 && !cut) {
              cut = true
              void proxy.close()
            }
          },
        })
        .then(
          () => undefined,
          (error: unknown) => error,
        )
      expect(stopped).toBeInstanceOf(ReplayStoppedError)
      const moved = (stopped as ReplayStoppedError).moved
      expect(moved).toBeGreaterThanOrEqual(1_000)
      expect(moved).toBeLessThan(total)
      expect((stopped as Error).message).toContain(`stopped after moving ${moved} message(s)`)
      // Every message is on one side or the other; one whose ack the cut lost is on both.
      await eventually(
        async () =>
          ((await admin.count(`${queue}.dlq`)) ?? 0) + ((await admin.count(queue)) ?? 0) >= total,
        10_000,
        'every message back on a queue',
      )
      expect(await admin.count(queue)).toBeGreaterThanOrEqual(moved)
      console.log(
        `cut off after ${moved} of ${total} moved: ${await admin.count(queue)} on the target, ${await admin.count(`${queue}.dlq`)} left on the source`,
      )
    } finally {
      await mq.close({ drainTimeout: 0 })
      await proxy.close().catch(() => undefined)
    }
  }, 60_000)
})
