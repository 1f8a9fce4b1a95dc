import type { ChannelModel } from 'amqplib'

/** What the watchdog reads of an amqplib connection (not in amqplib's typings). */
interface WatchedConnection {
  /** The negotiated heartbeat in seconds; 0 when off. */
  readonly heartbeat?: unknown
  readonly stream?: { readonly bytesRead?: unknown; destroy?(error?: Error): void }
}

/**
 * Watches that the broker keeps sending while heartbeats are on, and destroys the socket (with
 * an error saying why) once nothing has arrived for {@link SILENCE_LIMIT} heartbeat intervals.
 *
 * RabbitMQ sends a heartbeat frame whenever it has sent nothing for half an interval, so a
 * healthy connection is never silent for much more than one interval. amqplib's own check
 * looks once per interval for two silent ones in a row, and so notices a peer that stopped
 * answering only two to three intervals later; this one looks four times per interval at the
 * socket's byte count, and notices within 1.75 intervals. A check that runs late (an event
 * loop too busy to read the socket) is not held against the broker.
 */
export function watchHeartbeats(
  model: ChannelModel,
  onSilent: (message: string) => void,
): () => void {
  const connection = model.connection as unknown as WatchedConnection
  const stream = connection.stream
  const seconds = connection.heartbeat
  if (typeof seconds !== 'number' || seconds <= 0 || stream === undefined) return () => undefined
  const bytesRead = (): number | undefined =>
    typeof stream.bytesRead === 'number' ? stream.bytesRead : undefined
  if (bytesRead() === undefined) return () => undefined

  const intervalMs = seconds * 1_000
  const tickMs = Math.max(25, Math.floor(intervalMs / 4))
  const limitMs = intervalMs * SILENCE_LIMIT
  let lastBytes = bytesRead()
  let lastHeard = performance.now()
  let lastTick = lastHeard
  const timer = setInterval(() => {
    const now = performance.now()
    const late = now - lastTick > tickMs * 2
    lastTick = now
    const bytes = bytesRead()
    if (bytes !== lastBytes || late) {
      lastBytes = bytes
      lastHeard = now
      return
    }
    if (now - lastHeard < limitMs) return
    clearInterval(timer)
    const message = `nothing arrived from the broker for ${Math.round(now - lastHeard)} ms (heartbeat ${seconds} s): the connection is presumed dead`
    onSilent(message)
    stream.destroy?.(new Error(message))
  }, tickMs)
  timer.unref()
  return () => clearInterval(timer)
}

/** How many heartbeat intervals of silence mean the peer is gone (see {@link watchHeartbeats}). */
export const SILENCE_LIMIT = 1.5
