import type { Channel } from 'amqplib'
import { AceMqError, ConfigurationError, ErrorCodes } from '@acemq/core'
import { describeError, type Declaration } from '@acemq/core/spi'
import type { HeaderValue } from '@acemq/core'

const EXCHANGE_TYPES: ReadonlySet<string> = new Set(['direct', 'topic', 'fanout', 'headers'])

/** `{ '!': 'long', value }`: amqplib's notation for a value with an explicit AMQP type. */
interface TypedValue {
  readonly '!': string
  readonly value: unknown
}

function isTypedValue(value: unknown): value is TypedValue {
  return typeof value === 'object' && value !== null && Object.hasOwn(value, '!')
}

/**
 * Declaration arguments as they go on the wire: a plain integer becomes a signed 64-bit `long`
 * (amqplib would otherwise pick the smallest width, and RabbitMQ compares argument types when a
 * queue is re-declared, so every AceMQ library writes `x-message-ttl` as a long); a value that
 * already carries a type is passed through unchanged.
 */
export function encodeArguments(
  args: Readonly<Record<string, HeaderValue>>,
): Record<string, unknown> {
  const encoded: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(args)) {
    if (value === undefined) continue
    encoded[key] =
      typeof value === 'number' && Number.isSafeInteger(value) ? { '!': 'long', value } : value
  }
  return encoded
}

function render(value: unknown): string {
  return JSON.stringify(value, (_key, inner: unknown) =>
    isTypedValue(inner) ? inner.value : Buffer.isBuffer(inner) ? inner.toString('base64') : inner,
  )
}

/** Names a declaration for error messages: `queue 'orders.new' (quorum, durable, arguments {...})`. */
export function describeDeclaration(declaration: Declaration): string {
  switch (declaration.kind) {
    case 'exchange':
      return `exchange '${declaration.name}' (${declaration.type}, ${declaration.durable ? 'durable' : 'transient'}, arguments ${render(declaration.arguments)})`
    case 'queue':
      return `queue '${declaration.name}' (${declaration.type}, ${declaration.durable ? 'durable' : 'transient'}, arguments ${render(declaration.arguments)})`
    case 'binding':
      return `binding of queue '${declaration.queue}' to exchange '${declaration.exchange}' with routing key '${declaration.routingKey}'`
  }
}

/** A key that is equal for declarations that put the same thing on the wire. */
export function declarationKey(declaration: Declaration): string {
  const sorted = (args: Readonly<Record<string, HeaderValue>>): [string, unknown][] =>
    Object.entries(encodeArguments(args)).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  switch (declaration.kind) {
    case 'exchange':
      return render([
        'exchange',
        declaration.name,
        declaration.type,
        declaration.durable,
        sorted(declaration.arguments),
      ])
    case 'queue':
      return render([
        'queue',
        declaration.name,
        declaration.type,
        declaration.durable,
        sorted(declaration.arguments),
      ])
    case 'binding':
      return render([
        'binding',
        declaration.queue,
        declaration.exchange,
        declaration.routingKey,
        sorted(declaration.arguments),
      ])
  }
}

function requireString(value: unknown, name: string): void {
  if (typeof value !== 'string') {
    throw new ConfigurationError(`${name} must be a string; got ${render(value) ?? String(value)}`)
  }
}

function requireArguments(value: unknown, name: string): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigurationError(
      `${name} must be an object of arguments; got ${render(value) ?? String(value)}`,
    )
  }
}

/** Checks one declaration before anything is sent, naming the field and the value at fault. */
export function validateDeclaration(declaration: Declaration, index: number): void {
  const at = `declarations[${index}]`
  if (typeof declaration !== 'object' || declaration === null) {
    throw new ConfigurationError(`${at} must be a declaration object; got ${String(declaration)}`)
  }
  switch (declaration.kind) {
    case 'exchange':
      requireString(declaration.name, `${at}.name`)
      if (!EXCHANGE_TYPES.has(declaration.type)) {
        throw new ConfigurationError(
          `${at}.type must be one of direct, topic, fanout, headers; got '${String(declaration.type)}'`,
        )
      }
      requireArguments(declaration.arguments, `${at}.arguments`)
      return
    case 'queue': {
      requireString(declaration.name, `${at}.name`)
      if (declaration.name === '') {
        throw new ConfigurationError(`${at}.name must not be empty: AceMQ declares named queues`)
      }
      if (declaration.type !== 'classic' && declaration.type !== 'quorum') {
        throw new ConfigurationError(
          `${at}.type must be 'classic' or 'quorum'; got '${String(declaration.type)}'`,
        )
      }
      requireArguments(declaration.arguments, `${at}.arguments`)
      const queueType: unknown = declaration.arguments['x-queue-type']
      if (queueType !== undefined && !(declaration.type === 'quorum' && queueType === 'quorum')) {
        throw new ConfigurationError(
          `${at}.arguments must not set x-queue-type (${render(queueType)}) for a ${declaration.type} queue: the declaration's type decides it`,
        )
      }
      return
    }
    case 'binding':
      requireString(declaration.queue, `${at}.queue`)
      requireString(declaration.exchange, `${at}.exchange`)
      requireString(declaration.routingKey, `${at}.routingKey`)
      requireArguments(declaration.arguments, `${at}.arguments`)
      return
    default:
      throw new ConfigurationError(
        `${at}.kind must be 'exchange', 'queue' or 'binding'; got '${String((declaration as { kind?: unknown }).kind)}'`,
      )
  }
}

/** The broker's reply code on an amqplib channel error (406 is PRECONDITION_FAILED). */
export function replyCode(error: unknown): number | undefined {
  const code: unknown = (error as { code?: unknown } | null)?.code
  return typeof code === 'number' ? code : undefined
}

/** Wraps a broker refusal of one declaration in an error that names what was declared. */
export function declarationFailed(declaration: Declaration, error: unknown): AceMqError {
  const hint =
    replyCode(error) === 406
      ? declaration.kind === 'queue'
        ? ". A queue's type, durability and arguments cannot change once it exists: delete the queue, or declare it as it already is"
        : declaration.kind === 'exchange'
          ? ". An exchange's type, durability and arguments cannot change once it exists: delete the exchange, or declare it as it already is"
          : ''
      : ''
  return new AceMqError(
    `the broker refused to declare ${describeDeclaration(declaration)}: ${describeError(error)}${hint}`,
    { code: ErrorCodes.DECLARATION_FAILED, cause: error },
  )
}

/** Sends one declaration on `channel`. A refusal closes the channel (AMQP rules) and rejects. */
export async function applyDeclaration(channel: Channel, declaration: Declaration): Promise<void> {
  switch (declaration.kind) {
    case 'exchange':
      // The default exchange always exists and cannot be declared.
      if (declaration.name === '') return
      await channel.assertExchange(declaration.name, declaration.type, {
        durable: declaration.durable,
        autoDelete: false,
        internal: false,
        arguments: encodeArguments(declaration.arguments),
      })
      return
    case 'queue': {
      const args = encodeArguments(declaration.arguments)
      // A classic queue carries no x-queue-type at all, so it matches a queue declared by any
      // AceMQ library (or by hand) without one; only quorum queues name their type.
      if (declaration.type === 'quorum') args['x-queue-type'] = 'quorum'
      await channel.assertQueue(declaration.name, {
        durable: declaration.durable,
        exclusive: false,
        autoDelete: false,
        arguments: args,
      })
      return
    }
    case 'binding':
      await channel.bindQueue(
        declaration.queue,
        declaration.exchange,
        declaration.routingKey,
        encodeArguments(declaration.arguments),
      )
      return
  }
}
