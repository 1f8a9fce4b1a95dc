import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AceMq, Topology } from '@acemq/core'
import { readEnvelope } from '@acemq/core/spi'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { rabbitmqctl } from '../../../test-support/broker-faults.js'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import { eventually, requireRabbit, uniqueName } from '@acemq/testing'
import { AmqpTransport } from '../src/index.js'

const hasRabbit = await requireRabbit()

// RabbitMQ keeps a message's validated user-id when it dead-letters it, and refuses a publish
// whose user-id is not the connection's own login.
describe.runIf(hasRabbit)(
  'replaying a message the broker dead-lettered, under another login',
  () => {
    let vhost: BrokerVhost
    let admin: AmqpAdmin
    const operator = { user: uniqueName('acemq-operator'), password: `pw-${Math.random()}` }

    beforeAll(async () => {
      vhost = await BrokerVhost.create('acemq-replay-login')
      admin = await AmqpAdmin.open(vhost.url)
      await rabbitmqctl('add_user', operator.user, operator.password)
      await rabbitmqctl('set_permissions', '--vhost', vhost.name, operator.user, '.*', '.*', '.*')
    })
    afterAll(async () => {
      await admin?.close()
      await rabbitmqctl('delete_user', operator.user).catch(() => undefined)
      await vhost?.delete()
    })

    it('moves it: the copy drops the user-id of the first publisher', async () => {
      const queue = uniqueName('orders')
      const publisherUser = decodeURIComponent(new URL(vhost.url).username)
      {
        await using mq = await AceMq.connect(new AmqpTransport(vhost.url))
        await mq.applyTopology(Topology.define().queueWithDeadLetter(queue))
      }
      admin.channel.sendToQueue(queue, Buffer.from('{"id":"order-1"}'), {
        userId: publisherUser,
        headers: { 'x-acemq-id': 'order-1' },
      })
      await admin.channel.waitForConfirms()
      const delivery = await admin.channel.get(queue, { noAck: false })
      expect(delivery).not.toBe(false)
      if (delivery !== false) admin.channel.nack(delivery, false, false)
      await eventually(
        async () => (await admin.count(`${queue}.dlq`)) === 1,
        10_000,
        'dead-lettered',
      )

      const url = new URL(vhost.url)
      url.username = encodeURIComponent(operator.user)
      url.password = encodeURIComponent(operator.password)
      await using mq = await AceMq.connect(new AmqpTransport(url.toString()))
      expect(await mq.replay(`${queue}.dlq`).replayAll()).toBe(1)

      const copy = await admin.get(queue)
      expect(readEnvelope(copy?.headers, { routingKey: queue }).envelope.id).toBe('order-1')
      expect(copy?.properties.userId).toBeUndefined()
      expect(await admin.count(`${queue}.dlq`)).toBe(0)
    })
  },
)
