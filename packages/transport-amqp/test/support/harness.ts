import type { Delivery, OutgoingMessage, TransportEvent } from '@acemq/core/spi'
import { AmqpTransport } from '../../src/index.js'
import type { AmqpTransportOptions } from '../../src/index.js'

/** A persistent, mandatory message to `routingKey` through the default exchange. */
export function message(
  routingKey: string,
  body: string,
  overrides: Partial<OutgoingMessage> = {},
): OutgoingMessage {
  return {
    exchange: '',
    routingKey,
    body: Buffer.from(body),
    headers: {},
    properties: { contentType: 'text/plain', messageId: `${routingKey}:${body}` },
    persistent: true,
    mandatory: true,
    ...overrides,
  }
}

// The kit's poll, under the name this suite's files import.
export { eventually } from '@acemq/testing/helpers'

/** Resolves with the next event of `type` (or rejects after `timeoutMs`). */
export function nextEvent<T extends TransportEvent['type']>(
  transport: AmqpTransport,
  type: T,
  timeoutMs = 15_000,
): Promise<Extract<TransportEvent, { type: T }>> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      stop()
      reject(new Error(`no '${type}' event within ${timeoutMs} ms`))
    }, timeoutMs)
    const stop = transport.onEvent((event) => {
      if (event.type !== type) return
      clearTimeout(timer)
      stop()
      resolve(event as Extract<TransportEvent, { type: T }>)
    })
  })
}

/** Settles a promise into `'ok'` or its error, so a test can inspect outcomes without races. */
export function outcome(promise: Promise<unknown>): Promise<'ok' | Error> {
  return promise.then(
    () => 'ok' as const,
    (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
  )
}

/** Creates transports for one test file and closes every one of them after each test. */
export class Harness {
  readonly #transports: AmqpTransport[] = []
  readonly warnings: string[] = []
  url = ''

  /** A connected transport (the warnings it logs are collected, not printed). */
  async open(options: AmqpTransportOptions = {}): Promise<AmqpTransport> {
    const transport = this.create(options)
    await transport.connect()
    return transport
  }

  create(options: AmqpTransportOptions = {}): AmqpTransport {
    const transport = new AmqpTransport(this.url, {
      connectionName: 'acemq-transport-test',
      logger: { warn: (text) => this.warnings.push(text) },
      ...options,
    })
    this.#transports.push(transport)
    return transport
  }

  async closeAll(): Promise<void> {
    await Promise.all(this.#transports.splice(0).map((transport) => transport.close()))
    this.warnings.length = 0
  }
}

/** Collects deliveries as they arrive. */
export function collector(): { readonly deliveries: Delivery[]; onDelivery(d: Delivery): void } {
  const deliveries: Delivery[] = []
  return {
    deliveries,
    onDelivery: (delivery) => {
      deliveries.push(delivery)
    },
  }
}

/** The body of a delivery as text. */
export function text(delivery: Delivery): string {
  return Buffer.from(delivery.body).toString('utf8')
}
