import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AceMq, CodecRegistry, ConsumerOptions, Topology, type Codec } from '@acemq/core'
import { eventually, uniqueName } from '@acemq/testing'
import { AmqpTransport } from '@acemq/transport-amqp'
import { BrokerVhost } from './broker-vhost.js'

/**
 * One codec end to end on RabbitMQ, in a vhost of its own: a publisher with the codec's content
 * type sends `value`, a consumer of the same connection decodes it, and the payload, the content
 * type on the wire and the body are what the codec makes.
 */
export function codecOnRabbit<T>(
  name: string,
  codec: Codec<T>,
  value: T,
  hasRabbit: boolean,
): void {
  describe.runIf(hasRabbit)(`${name} on RabbitMQ`, () => {
    let vhost: BrokerVhost

    beforeAll(async () => {
      vhost = await BrokerVhost.create(`acemq-${codec.contentType.replace(/\W+/g, '-')}`)
    }, 60_000)

    afterAll(async () => {
      await vhost?.delete()
    }, 60_000)

    it('a payload published with the codec is consumed as the same value', async () => {
      const queue = uniqueName('acemq.codec')
      const mq = await AceMq.connect(new AmqpTransport(vhost.url), {
        codecs: CodecRegistry.defaults().with(codec),
      })
      try {
        await mq.applyTopology(Topology.define().queueWithDeadLetter(queue))
        const received: { payload: unknown; contentType: string | undefined; body: Uint8Array }[] =
          []
        await mq.consume(queue, ConsumerOptions.defaults(), (message) => {
          received.push(message)
        })
        await mq
          .publisher<T>('', queue, { contentType: codec.contentType })
          .send(value, { id: 'codec-1' })
        await eventually(() => received.length > 0, 10_000, 'the message consumed')
        expect(received[0]?.payload).toEqual(value)
        expect(received[0]?.contentType).toBe(codec.contentType)
        expect(Buffer.from(received[0]?.body ?? [])).toEqual(Buffer.from(codec.encode(value)))
      } finally {
        await mq.close({ drainTimeout: 0 })
      }
    })
  })
}
