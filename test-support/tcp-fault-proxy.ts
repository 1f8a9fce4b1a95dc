import net from 'node:net'

/** Which way bytes go through the proxy. */
export type ProxyDirection = 'to-broker' | 'to-client'

/** What {@link TcpFaultProxy.cutMidFrame} cut. */
export interface FrameCut {
  /** The client-provided connection name of the connection cut (`<name> (publish)`). */
  readonly connection: string
  /** The AMQP frame type cut (1 method, 2 header, 3 body, 8 heartbeat). */
  readonly frameType: number
  /** The frame's full length, and how many of its bytes went through before the cut. */
  readonly frameLength: number
  readonly forwarded: number
}

/** AMQP 0-9-1 frames: type (1), channel (2), size (4), payload (size), frame-end (1). */
const FRAME_OVERHEAD = 8
/** The client opens with `AMQP\x00\x00\x09\x01`. */
const PROTOCOL_HEADER = 8

/** Where a stream is inside an AMQP frame. */
interface FramePosition {
  readonly type: number
  /** The frame's full length. */
  readonly length: number
  /** How many of its bytes have passed. */
  readonly offset: number
}

/** Follows the AMQP frame boundaries of one direction of a connection. */
class FrameTracker {
  preamble: number
  header = Buffer.alloc(7)
  headerFill = 0
  /** Bytes of the current frame after its 7-byte header still to come. */
  remaining = 0
  type = 0
  length = 0

  constructor(preamble: number) {
    this.preamble = preamble
  }

  clone(): FrameTracker {
    const copy = new FrameTracker(this.preamble)
    copy.header = Buffer.from(this.header)
    copy.headerFill = this.headerFill
    copy.remaining = this.remaining
    copy.type = this.type
    copy.length = this.length
    return copy
  }

  /** Consumes `chunk[from, to)`. */
  advance(chunk: Buffer, from = 0, to = chunk.length): void {
    let at = from
    while (at < to) {
      if (this.preamble > 0) {
        const skip = Math.min(this.preamble, to - at)
        this.preamble -= skip
        at += skip
      } else if (this.remaining > 0) {
        const skip = Math.min(this.remaining, to - at)
        this.remaining -= skip
        at += skip
      } else {
        this.header[this.headerFill++] = chunk[at++] as number
        if (this.headerFill === 7) {
          this.headerFill = 0
          this.type = this.header.readUInt8(0)
          this.length = this.header.readUInt32BE(3) + FRAME_OVERHEAD
          this.remaining = this.length - 7
        }
      }
    }
  }

  /** Inside a frame whose header has been read: where. */
  position(): FramePosition | undefined {
    if (this.preamble > 0 || this.headerFill > 0 || this.remaining === 0) return undefined
    return { type: this.type, length: this.length, offset: this.length - this.remaining }
  }

  /**
   * How much of `chunk` to pass so that the stream stops half way through a frame (at least
   * one byte of the frame passed, at least one not), or `undefined` when `chunk` holds no such
   * point after a frame header.
   */
  cutPoint(chunk: Buffer): { end: number; position: FramePosition } | undefined {
    const probe = this.clone()
    let at = 0
    while (at <= chunk.length) {
      const position = probe.position()
      if (position !== undefined) {
        const half = Math.max(8, Math.floor(position.length / 2))
        const end = at + Math.max(0, half - position.offset)
        if (end <= chunk.length && position.offset + (end - at) < position.length) {
          return { end, position: { ...position, offset: position.offset + (end - at) } }
        }
      }
      if (at === chunk.length) return undefined
      // Step to the next point where a frame's header has just been read, or the chunk's end.
      const step =
        probe.preamble > 0
          ? probe.preamble
          : probe.remaining > 0
            ? probe.remaining
            : 7 - probe.headerFill
      const next = Math.min(chunk.length, at + step)
      probe.advance(chunk, at, next)
      at = next
    }
    return undefined
  }
}

interface Pipe {
  readonly from: net.Socket
  readonly to: net.Socket
  readonly direction: ProxyDirection
  readonly frames: FrameTracker
  readonly queue: { chunk: Buffer; at: number }[]
  lastAt: number
  timer: NodeJS.Timeout | undefined
}

interface Pair {
  readonly client: net.Socket
  readonly upstream: net.Socket
  readonly pipes: Record<ProxyDirection, Pipe>
  /** The first bytes the client sent (its connection name is in them). */
  hello: string
  stalled: boolean
  cut: { direction: ProxyDirection; resolve: (cut: FrameCut) => void } | undefined
}

/**
 * A TCP proxy between a client and a broker that a test controls, for faults a polite
 * `close_connection` cannot make:
 * - {@link stall}: every open connection stops passing bytes either way, and stays open (a
 *   broker or network path that stops answering without closing);
 * - {@link setLatency}: each direction's bytes are held `ms` before they pass, in order;
 * - {@link setLoss}: each chunk is, with a probability, held a retransmission timeout more, and
 *   everything behind it waits too. That is what a lost segment does to a TCP stream (the
 *   kernel retransmits; nothing is lost or reordered, everything behind it stalls). This
 *   machine's kernel has no `netem`, so loss is emulated here, at the level TCP hands it up;
 * - {@link cutMidFrame}: a connection is cut in the middle of an AMQP frame.
 *
 * @example
 * ```ts
 * const proxy = await TcpFaultProxy.start('127.0.0.1', 5672)
 * const transport = new AmqpTransport(proxy.urlFor(AMQP_URL))
 * proxy.stall()
 * ```
 */
export class TcpFaultProxy {
  readonly #server: net.Server
  readonly #pairs = new Set<Pair>()
  #latencyMs = 0
  #lossProbability = 0
  #retransmitMs = 200
  #held = 0

  private constructor(server: net.Server) {
    this.#server = server
  }

  /** Starts a proxy on a free port of 127.0.0.1 that forwards to `host:port`. */
  static async start(host: string, port: number): Promise<TcpFaultProxy> {
    const server = net.createServer()
    const proxy = new TcpFaultProxy(server)
    server.on('connection', (client) => proxy.#accept(client, host, port))
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    return proxy
  }

  get port(): number {
    return (this.#server.address() as net.AddressInfo).port
  }

  /** `url` with its host and port replaced by the proxy's. */
  urlFor(url: string): string {
    const parsed = new URL(url)
    parsed.hostname = '127.0.0.1'
    parsed.port = String(this.port)
    return parsed.toString()
  }

  /** How many chunks {@link setLoss} has held back so far. */
  get held(): number {
    return this.#held
  }

  /** Open connections (client and broker sockets both alive). */
  get connections(): number {
    return this.#pairs.size
  }

  /** Holds each direction's bytes `ms` before they pass (0: none). */
  setLatency(ms: number): void {
    this.#latencyMs = ms
  }

  /** Holds a chunk (and all behind it) `retransmitMs` more with `probability` (0: none). */
  setLoss(probability: number, retransmitMs = 200): void {
    this.#lossProbability = probability
    this.#retransmitMs = retransmitMs
  }

  /**
   * Every connection open now stops passing bytes, either way, and is kept open: a broker
   * closing its side is not passed on either. New connections pass as usual.
   */
  stall(): number {
    for (const pair of this.#pairs) pair.stalled = true
    return this.#pairs.size
  }

  /**
   * Cuts the connection whose client-provided name is `name` in the middle of
   * the next frame that goes `direction`: the first part of the frame passes, then both
   * sockets are destroyed. Resolves with what was cut.
   */
  cutMidFrame(name: string, direction: ProxyDirection): Promise<FrameCut> {
    const pair = [...this.#pairs].find((candidate) => connectionName(candidate.hello) === name)
    if (pair === undefined) {
      return Promise.reject(new Error(`no connection named '${name}' goes through the proxy`))
    }
    return new Promise((resolve) => {
      pair.cut = { direction, resolve }
    })
  }

  /** Destroys every connection and stops listening. */
  async close(): Promise<void> {
    for (const pair of this.#pairs) this.#destroy(pair)
    await new Promise<void>((resolve) => this.#server.close(() => resolve()))
  }

  #accept(client: net.Socket, host: string, port: number): void {
    const upstream = net.connect({ host, port })
    client.setNoDelay(true)
    upstream.setNoDelay(true)
    const pipe = (from: net.Socket, to: net.Socket, direction: ProxyDirection): Pipe => ({
      from,
      to,
      direction,
      frames: new FrameTracker(direction === 'to-broker' ? PROTOCOL_HEADER : 0),
      queue: [],
      lastAt: 0,
      timer: undefined,
    })
    const pair: Pair = {
      client,
      upstream,
      pipes: {
        'to-broker': pipe(client, upstream, 'to-broker'),
        'to-client': pipe(upstream, client, 'to-client'),
      },
      hello: '',
      stalled: false,
      cut: undefined,
    }
    this.#pairs.add(pair)
    for (const direction of ['to-broker', 'to-client'] as const) {
      const current = pair.pipes[direction]
      current.from.on('data', (chunk: Buffer) => {
        if (direction === 'to-broker' && pair.hello.length < 4_096) {
          pair.hello += chunk.toString('latin1')
        }
        this.#enqueue(pair, current, chunk)
      })
    }
    const end = (): void => {
      // A stalled connection keeps its client side open whatever the broker does.
      if (!pair.stalled) this.#destroy(pair)
    }
    client.on('error', () => this.#destroy(pair))
    client.on('close', () => this.#destroy(pair))
    upstream.on('error', end)
    upstream.on('close', end)
  }

  #enqueue(pair: Pair, pipe: Pipe, chunk: Buffer): void {
    const now = performance.now()
    const lost = this.#lossProbability > 0 && Math.random() < this.#lossProbability
    if (lost) this.#held += 1
    const at = Math.max(pipe.lastAt, now + this.#latencyMs) + (lost ? this.#retransmitMs : 0)
    pipe.lastAt = at
    pipe.queue.push({ chunk, at })
    this.#pump(pair, pipe)
  }

  #pump(pair: Pair, pipe: Pipe): void {
    if (pipe.timer !== undefined || pair.stalled) return
    for (;;) {
      const next = pipe.queue[0]
      if (next === undefined || pair.stalled || !this.#pairs.has(pair)) return
      const wait = next.at - performance.now()
      if (wait > 1) {
        pipe.timer = setTimeout(() => {
          pipe.timer = undefined
          this.#pump(pair, pipe)
        }, wait)
        return
      }
      pipe.queue.shift()
      if (pair.cut?.direction === pipe.direction && this.#cut(pair, pipe, next.chunk)) return
      pipe.frames.advance(next.chunk)
      pipe.to.write(next.chunk)
    }
  }

  /** Passes `chunk` up to the middle of a frame and cuts; false to try the next chunk. */
  #cut(pair: Pair, pipe: Pipe, chunk: Buffer): boolean {
    const cut = pair.cut
    const point = pipe.frames.cutPoint(chunk)
    if (cut === undefined || point === undefined) return false
    pair.cut = undefined
    pipe.to.write(chunk.subarray(0, point.end), () => this.#destroy(pair))
    cut.resolve({
      connection: connectionName(pair.hello),
      frameType: point.position.type,
      frameLength: point.position.length,
      forwarded: point.position.offset,
    })
    return true
  }

  #destroy(pair: Pair): void {
    if (!this.#pairs.delete(pair)) return
    for (const pipe of Object.values(pair.pipes)) {
      if (pipe.timer !== undefined) clearTimeout(pipe.timer)
      pipe.queue.length = 0
    }
    pair.client.destroy()
    pair.upstream.destroy()
  }
}

/** The `connection_name` client property (a long string: `S`, a 32-bit length, the text). */
function connectionName(hello: string): string {
  const bytes = Buffer.from(hello, 'latin1')
  const key = bytes.indexOf('connection_nameS')
  if (key < 0 || key + 20 > bytes.length) return ''
  const start = key + 'connection_nameS'.length + 4
  return bytes.subarray(start, start + bytes.readUInt32BE(start - 4)).toString('utf8')
}
