import type { Channel, ChannelModel } from 'amqplib'
import { describeError, type MessageProperties } from '@acemq/core/spi'

/** The AMQP basic properties the transport carries, in both directions. */
export const PROPERTY_NAMES = [
  'contentType',
  'contentEncoding',
  'messageId',
  'correlationId',
  'replyTo',
  'expiration',
  'timestamp',
  'type',
  'appId',
  'userId',
  'priority',
] as const satisfies readonly (keyof MessageProperties)[]

/** How long a polite close may take before the socket is destroyed (2 s). */
export const CLOSE_TIMEOUT = 2_000

/**
 * Reconnect and re-subscribe backoff in milliseconds. It lives here, beside
 * {@link backoffDelay}, so the connection and the subscriptions that use it import it from
 * below them (the connection imports this file).
 */
export interface Backoff {
  readonly initialDelay: number
  readonly maxDelay: number
}

/** Exponential backoff, factor 2, ±20 % jitter, capped at `maxDelay`. `attempt` counts from 1. */
export function backoffDelay(backoff: Backoff, attempt: number): number {
  const base = Math.min(backoff.maxDelay, backoff.initialDelay * 2 ** Math.min(attempt - 1, 30))
  const jittered = base * (1 + (Math.random() * 2 - 1) * 0.2)
  return Math.max(0, Math.round(Math.min(backoff.maxDelay, jittered)))
}

function withTimeout(work: Promise<unknown>, onTimeout: () => void): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      onTimeout()
      resolve()
    }, CLOSE_TIMEOUT)
    timer.unref()
    work.then(
      () => {
        clearTimeout(timer)
        resolve()
      },
      () => {
        clearTimeout(timer)
        resolve()
      },
    )
  })
}

/**
 * The socket under an amqplib connection. Not part of amqplib's typings: used only to end a
 * connection whose broker does not answer a polite close.
 */
function socketOf(model: ChannelModel): { destroy?: () => void } | undefined {
  const stream: unknown = (model.connection as { stream?: unknown }).stream
  return typeof stream === 'object' && stream !== null
    ? (stream as { destroy?: () => void })
    : undefined
}

/**
 * Closes a connection without throwing (an already-dead connection is fine), and destroys its
 * socket when the broker does not answer within {@link CLOSE_TIMEOUT}, so close never hangs and
 * leaves no handle behind.
 */
export async function closeModelQuietly(model: ChannelModel): Promise<void> {
  model.on('error', () => undefined)
  let closing: Promise<void>
  try {
    closing = model.close()
  } catch {
    return
  }
  await withTimeout(closing, () => socketOf(model)?.destroy?.())
}

/** Closes a channel without throwing; gives up waiting after {@link CLOSE_TIMEOUT}. */
export async function closeChannelQuietly(channel: Channel): Promise<void> {
  channel.on('error', () => undefined)
  let closing: Promise<void>
  try {
    closing = channel.close()
  } catch {
    return
  }
  await withTimeout(closing, () => undefined)
}

/**
 * A short-lived channel for declarations and passive checks: a broker refusal closes it (and
 * only it), so its `error` events are expected and ignored; a throwing listener is reported.
 */
export async function openShortLivedChannel(
  model: ChannelModel,
  warn: (message: string) => void,
): Promise<Channel> {
  const channel = await model.createChannel()
  channel.on('error', () => undefined)
  channel.on('handler-error', (error: Error, event: string) =>
    warn(`a listener for a declaration channel's '${event}' event threw: ${describeError(error)}`),
  )
  return channel
}
