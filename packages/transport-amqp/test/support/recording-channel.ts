import type { Channel, ConsumeMessage } from 'amqplib'

/**
 * A consumer channel, faked for the unit tests of its acknowledgements: the frames it was asked to
 * write, as `ack <tag>`, `ack <tag>+` (multiple), `nack <tag>` (`nack <tag> requeue` when it
 * requeues); once closed, it throws on every frame as amqplib's channel does.
 */
export function recordingChannel(): { channel: Channel; frames: string[]; close(): void } {
  const frames: string[] = []
  let closed = false
  const push = (frame: string): void => {
    if (closed) throw new Error('Channel closed')
    frames.push(frame)
  }
  const channel = {
    ack: (message: ConsumeMessage, multiple?: boolean) =>
      push(`ack ${message.fields.deliveryTag}${multiple === true ? '+' : ''}`),
    nack: (message: ConsumeMessage, multiple?: boolean, requeue?: boolean) =>
      push(
        `nack ${message.fields.deliveryTag}${multiple === true ? '+' : ''}${requeue === true ? ' requeue' : ''}`,
      ),
  }
  return { channel: channel as unknown as Channel, frames, close: () => (closed = true) }
}

/** A delivery with `tag` as its delivery tag (and the fields `AmqpDelivery` reads). */
export function delivery(tag: number): ConsumeMessage {
  return {
    content: Buffer.from(`body ${tag}`),
    fields: { deliveryTag: tag, exchange: 'x', routingKey: 'k', redelivered: false },
    properties: { headers: {} },
  } as unknown as ConsumeMessage
}
