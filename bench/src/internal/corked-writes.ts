import type { ChannelModel } from 'amqplib'
import { amqplibSupported } from '../../../packages/transport-amqp/src/internal/wire-headers.js'

/**
 * amqplib queues each channel's frames and writes them to the socket in passes of its frame
 * multiplexer (one per event-loop turn), one `socket.write` per message. With Nagle's algorithm
 * off, as the transport connects, every one of those writes is a system call and a TCP segment
 * of its own: a publisher sending a hundred messages in a turn pays for a hundred. Corking the
 * socket for the length of a pass makes the pass one `writev` — the same bytes, in the same
 * order, written at the same moment (the pass is synchronous and the socket is uncorked at its
 * end), in as few segments as they fill.
 *
 * The transport's publish connection did this during issue 21 and stopped: past the socket's
 * 16 KiB high-water mark the corked write answers false, the multiplexer waits for 'drain', and
 * confirmed-publish throughput came out about 0.1 × raw lower than uncorked in the same runs.
 * Kept here for the publish-cost experiment's `amqplib-corked` variant.
 */

/** amqplib's socket and frame multiplexer (2.x, `lib/connection.js` and `lib/mux.js`). */
interface MuxInternals {
  readonly stream?: { cork?: unknown; uncork?: unknown }
  readonly muxer?: { _readIncoming?: unknown }
}

interface Corkable {
  cork(): void
  uncork(): void
}

/**
 * Writes each pass of `model`'s frame multiplexer as one socket write. Answers false, changing
 * nothing, when this amqplib is not one whose internals the transport knows.
 */
export function writeEachPassAtOnce(model: ChannelModel): boolean {
  if (!amqplibSupported()) return false
  const { stream, muxer } = model.connection as unknown as MuxInternals
  if (
    stream === undefined ||
    muxer === undefined ||
    typeof stream.cork !== 'function' ||
    typeof stream.uncork !== 'function' ||
    typeof muxer._readIncoming !== 'function' ||
    Object.hasOwn(muxer, '_readIncoming')
  ) {
    return false
  }
  const socket = stream as Corkable
  const pass = muxer._readIncoming as () => void
  muxer._readIncoming = function readIncoming(this: unknown): void {
    socket.cork()
    try {
      pass.call(this)
    } finally {
      socket.uncork()
    }
  }
  return true
}
