import { afterEach, describe, expect, it } from 'vitest'
import amqplib, { type ChannelModel, type Options } from 'amqplib'
import { AMQP_URL, requireRabbit, uniqueName } from '@acemq/testing'
import { encodePublishesDirectly } from '../../src/internal/publish-frames.js'

const hasRabbit = await requireRabbit()

/** Messages the encoder takes, and some it leaves to amqplib (the last three). */
const MESSAGES: readonly { readonly content: Buffer; readonly options: Options.Publish }[] = [
  {
    content: Buffer.from('{"orderId":"o-1"}'),
    options: {
      persistent: true,
      mandatory: true,
      contentType: 'application/json',
      messageId: 'id-1',
      headers: {
        'x-acemq-id': 'id-1',
        'x-acemq-version': { '!': 'int', value: 1 },
        'x-acemq-first-seen': { '!': 'long', value: 1_733_300_000_123 },
        'x-tenant': 'Zürich ✓',
        flag: true,
        small: -5,
        medium: 40_000,
        large: 2 ** 40,
      },
    },
  },
  { content: Buffer.alloc(0), options: { messageId: 'empty', priority: 3, expiration: 60_000 } },
  { content: Buffer.from('nested'), options: { headers: { table: { a: 1 }, list: ['x'] } } },
  { content: Buffer.alloc(5_000, 7), options: { headers: { big: 'body' }, appId: 'app' } },
  { content: Buffer.from('stamped'), options: { timestamp: 1_733_300_000, CC: ['elsewhere'] } },
]

/** Publishes {@link MESSAGES} on `model` and reads them back: fields and properties. */
async function roundTrip(model: ChannelModel): Promise<unknown[]> {
  const channel = await model.createConfirmChannel()
  const queue = uniqueName('publish.frames')
  await channel.assertQueue(queue, { exclusive: true })
  for (const { content, options } of MESSAGES) channel.publish('', queue, content, options)
  await channel.waitForConfirms()
  const received: unknown[] = []
  for (;;) {
    const message = await channel.get(queue, { noAck: true })
    if (message === false) break
    const { deliveryTag: _tag, ...fields } = message.fields
    received.push({
      fields: { ...fields, routingKey: 'q' },
      properties: message.properties,
      content: message.content,
    })
  }
  return received
}

describe.runIf(hasRabbit)('publishes encoded directly', () => {
  let models: ChannelModel[] = []

  afterEach(async () => {
    await Promise.all(models.map((model) => model.close()))
    models = []
  })

  it('reach the broker as the same messages amqplib sends, taken or left to amqplib', async () => {
    const direct = await amqplib.connect(AMQP_URL)
    const plain = await amqplib.connect(AMQP_URL)
    models = [direct, plain]
    expect(encodePublishesDirectly(direct)).toBe(true)
    // Once per connection: a second call finds it replaced and changes nothing.
    expect(encodePublishesDirectly(direct)).toBe(false)
    const received = await roundTrip(direct)
    expect(received).toHaveLength(MESSAGES.length)
    expect(received).toEqual(await roundTrip(plain))
    expect(received[0]).toMatchObject({
      properties: {
        messageId: 'id-1',
        deliveryMode: 2,
        headers: {
          'x-acemq-version': 1,
          'x-acemq-first-seen': 1_733_300_000_123,
          'x-tenant': 'Zürich ✓',
          large: 2 ** 40,
        },
      },
    })
  })

  it('changes nothing on a connection without the internals it knows', () => {
    const unknown = { connection: { channels: {} } } as unknown as ChannelModel
    expect(encodePublishesDirectly(unknown)).toBe(false)
  })
})
