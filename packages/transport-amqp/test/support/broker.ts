import net from 'node:net'
import {
  holdBrokerFaultLock as holdLock,
  rabbitmqctl,
} from '../../../../test-support/broker-faults.js'
import { AMQP_URL } from '@acemq/testing'

/**
 * A TCP proxy in front of the broker that records every byte the broker sends, so a test can
 * look at the exact AMQP encoding of a header (amqplib decodes every integer width to a number).
 */
export class RecordingProxy {
  readonly #server: net.Server
  readonly #sockets = new Set<net.Socket>()
  readonly #received: Buffer[] = []
  /** What each client connection has sent, one list of chunks per connection. */
  readonly #sent: Buffer[][] = []

  private constructor(server: net.Server) {
    this.#server = server
  }

  static async start(): Promise<RecordingProxy> {
    const target = new URL(AMQP_URL)
    const server = net.createServer()
    const proxy = new RecordingProxy(server)
    server.on('connection', (client) => {
      const upstream = net.connect({ host: target.hostname, port: Number(target.port || 5672) })
      proxy.#sockets.add(client)
      proxy.#sockets.add(upstream)
      const sent: Buffer[] = []
      proxy.#sent.push(sent)
      client.on('data', (chunk: Buffer) => sent.push(chunk))
      client.pipe(upstream)
      upstream.on('data', (chunk: Buffer) => proxy.#received.push(chunk))
      upstream.pipe(client)
      const end = (): void => {
        client.destroy()
        upstream.destroy()
      }
      client.on('error', end)
      upstream.on('error', end)
      client.on('close', end)
      upstream.on('close', end)
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    return proxy
  }

  /** `url` with its host and port replaced by the proxy's. */
  urlFor(url: string): string {
    const address = this.#server.address() as net.AddressInfo
    const parsed = new URL(url)
    parsed.hostname = '127.0.0.1'
    parsed.port = String(address.port)
    return parsed.toString()
  }

  /** Everything the broker has sent so far. */
  received(): Buffer {
    return Buffer.concat(this.#received)
  }

  /** Everything each client connection has sent so far, one buffer per connection. */
  sent(): Buffer[] {
    return this.#sent.map((chunks) => Buffer.concat(chunks))
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy()
    await new Promise<void>((resolve) => this.#server.close(() => resolve()))
  }
}

/** The AMQP field-table encoding of a key followed by a value's type tag: `<len><key><tag>`. */
export function fieldTag(key: string, tag: string): Buffer {
  return Buffer.concat([Buffer.from([Buffer.byteLength(key)]), Buffer.from(key), Buffer.from(tag)])
}

export { LOCK_WAIT_TIMEOUT } from '../../../../test-support/broker-faults.js'

/**
 * Holds the shared broker-fault lock until the returned function is called. Suites that
 * publish and measure take it for their whole run, so a memory alarm raised by a disruptive
 * test running at the same time (another package, another engineer) cannot block them.
 */
export async function holdBrokerFaultLock(): Promise<() => Promise<void>> {
  const lock = await holdLock()
  return () => lock.release()
}

/**
 * Has the broker close the one connection on `vhost` whose client-provided name is `name` (as
 * an operator's `rabbitmqctl close_connection` would), leaving every other connection alone.
 * Hold the broker-fault lock around it.
 */
export async function closeConnectionNamed(vhost: string, name: string): Promise<void> {
  const rows = (
    await rabbitmqctl('list_connections', 'pid', 'vhost', 'client_properties', '--silent')
  )
    .split('\n')
    .map((line) => line.split('\t'))
  const row = rows.find(
    ([, host, properties]) =>
      host === vhost && properties?.includes(`{"connection_name","${name}"}`) === true,
  )
  if (row?.[0] === undefined) throw new Error(`no connection named '${name}' on vhost ${vhost}`)
  await rabbitmqctl('close_connection', row[0], 'acemq test: forced close of one connection')
}

/** One `basic.ack` frame as the client wrote it. */
export interface AckFrame {
  readonly channel: number
  readonly deliveryTag: number
  readonly multiple: boolean
}

/** The `basic.ack` frames each connection sent (the protocol header, then frames), in order. */
export function ackFrames(connections: readonly Buffer[]): AckFrame[] {
  return connections.flatMap((bytes) => connectionAcks(bytes))
}

function connectionAcks(bytes: Buffer): AckFrame[] {
  const acks: AckFrame[] = []
  // The protocol header 'AMQP' 0 0 9 1 comes first.
  let at = bytes.subarray(0, 4).toString() === 'AMQP' ? 8 : 0
  while (at + 7 <= bytes.length) {
    const type = bytes.readUInt8(at)
    const channel = bytes.readUInt16BE(at + 1)
    const size = bytes.readUInt32BE(at + 3)
    const payload = at + 7
    // A method frame of class 60 (basic), method 80 (ack): tag (64 bits), then the multiple bit.
    if (
      type === 1 &&
      bytes.readUInt16BE(payload) === 60 &&
      bytes.readUInt16BE(payload + 2) === 80
    ) {
      const deliveryTag = Number(bytes.readBigUInt64BE(payload + 4))
      acks.push({ channel, deliveryTag, multiple: (bytes.readUInt8(payload + 12) & 1) === 1 })
    }
    at = payload + size + 1
  }
  return acks
}
