/**
 * Exchanges as RabbitMQ keeps them: the predeclared `amq.*` ones, declarations compared on a
 * second declare, bindings told apart by their arguments, and routing on direct, topic, fanout
 * and headers exchanges with `alternate-exchange`.
 */
import type { Declaration, ExchangeType, Headers } from '../transport.js'
import {
  inequivalent,
  refused,
  type HeadersMatch,
  type MemoryExchange,
  type MemoryQueue,
  type XMatch,
} from './broker-model.js'
import {
  argumentTable,
  canonical,
  equivalentArgument,
  headerTable,
  looselyEqual,
  toWire,
  type Wire,
} from './wire-values.js'

/** The exchanges every RabbitMQ virtual host starts with. */
const PREDECLARED: readonly (readonly [string, ExchangeType])[] = [
  ['amq.direct', 'direct'],
  ['amq.fanout', 'fanout'],
  ['amq.topic', 'topic'],
  ['amq.headers', 'headers'],
  ['amq.match', 'headers'],
]

/** A virtual host's exchanges as it starts. */
export function predeclaredExchanges(): Map<string, MemoryExchange> {
  return new Map(
    PREDECLARED.map(([name, type]) => [
      name,
      { name, type, durable: true, arguments: {}, bindings: [] },
    ]),
  )
}

/** Declares an exchange, or checks a second declaration against the first as RabbitMQ does. */
export function declareExchange(
  exchanges: Map<string, MemoryExchange>,
  declaration: Extract<Declaration, { kind: 'exchange' }>,
): void {
  // The default exchange always exists; like the AMQP transport, declaring it does nothing.
  if (declaration.name === '') return
  const existing = exchanges.get(declaration.name)
  if (existing === undefined) {
    if (declaration.name.startsWith('amq.')) {
      throw refused(
        declaration,
        `ACCESS_REFUSED - exchange name '${declaration.name}' contains reserved prefix 'amq.*'`,
      )
    }
    exchanges.set(declaration.name, {
      name: declaration.name,
      type: declaration.type,
      durable: declaration.durable,
      arguments: declaration.arguments,
      bindings: [],
    })
    return
  }
  if (existing.type !== declaration.type) throw inequivalent(declaration, 'type')
  if (existing.durable !== declaration.durable) throw inequivalent(declaration, 'durable')
  const key = 'alternate-exchange'
  if (!equivalentArgument(existing.arguments[key], declaration.arguments[key])) {
    throw inequivalent(declaration, key)
  }
}

/** Binds a queue; a binding with the same routing key and arguments is the same binding. */
export function declareBinding(
  exchanges: ReadonlyMap<string, MemoryExchange>,
  queues: ReadonlyMap<string, MemoryQueue>,
  declaration: Extract<Declaration, { kind: 'binding' }>,
): void {
  if (declaration.exchange === '') {
    throw refused(declaration, 'ACCESS_REFUSED - operation not permitted on the default exchange')
  }
  const exchange = exchanges.get(declaration.exchange)
  if (exchange === undefined) {
    throw refused(declaration, `NOT_FOUND - no exchange '${declaration.exchange}'`)
  }
  if (!queues.has(declaration.queue)) {
    throw refused(declaration, `NOT_FOUND - no queue '${declaration.queue}'`)
  }
  const table = argumentTable(declaration.arguments)
  let match: HeadersMatch | undefined
  if (exchange.type === 'headers') {
    const mode = xMatchMode(declaration.arguments['x-match'])
    if (typeof mode !== 'string') throw refused(declaration, mode.error)
    match = { mode, table }
  }
  const identity = `${declaration.routingKey}\u0000${canonical({ t: 'table', v: table })}`
  const duplicate = exchange.bindings.some(
    (b) => b.queue === declaration.queue && b.identity === identity,
  )
  if (!duplicate) {
    exchange.bindings.push({
      queue: declaration.queue,
      routingKey: declaration.routingKey,
      identity,
      match,
    })
  }
}

/** The queues a message goes to; undefined when the exchange does not exist. */
export function route(
  exchanges: ReadonlyMap<string, MemoryExchange>,
  queues: ReadonlyMap<string, MemoryQueue>,
  exchangeName: string,
  routingKey: string,
  headers: Headers,
): MemoryQueue[] | undefined {
  if (exchangeName === '') {
    const queue = queues.get(routingKey)
    return queue === undefined ? [] : [queue]
  }
  let exchange = exchanges.get(exchangeName)
  if (exchange === undefined) return undefined
  let data: Map<string, Wire> | undefined
  const names = new Set<string>()
  const visited = new Set<string>()
  while (exchange !== undefined && !visited.has(exchange.name)) {
    visited.add(exchange.name)
    for (const binding of exchange.bindings) {
      if (names.has(binding.queue)) continue
      let matched: boolean
      switch (exchange.type) {
        case 'direct':
          matched = binding.routingKey === routingKey
          break
        case 'fanout':
          matched = true
          break
        case 'topic':
          matched = topicMatches(binding.routingKey.split('.'), routingKey.split('.'))
          break
        case 'headers':
          data ??= headerTable(headers)
          matched = binding.match !== undefined && headersMatch(binding.match, data)
          break
      }
      if (matched) names.add(binding.queue)
    }
    if (names.size > 0) break
    // Nothing bound took it: an alternate exchange, when there is one, gets the chance.
    const alternate: unknown = exchange.arguments['alternate-exchange']
    exchange = typeof alternate === 'string' ? exchanges.get(alternate) : undefined
  }
  return [...names].flatMap((name) => {
    const queue = queues.get(name)
    return queue === undefined ? [] : [queue]
  })
}

function topicMatches(pattern: readonly string[], words: readonly string[]): boolean {
  if (pattern.length === 0) return words.length === 0
  const [head, ...rest] = pattern
  if (head === '#') {
    for (let i = 0; i <= words.length; i++) if (topicMatches(rest, words.slice(i))) return true
    return false
  }
  if (words.length === 0) return false
  return (head === '*' || head === words[0]) && topicMatches(rest, words.slice(1))
}

/** A headers binding's `x-match`, validated as RabbitMQ validates it. */
function xMatchMode(value: unknown): XMatch | { readonly error: string } {
  if (value === undefined) return 'all'
  if (typeof value !== 'string') {
    const wire = toWire(value)
    return {
      error: `PRECONDITION_FAILED - Invalid x-match field type ${'w' in wire ? wire.w : wire.t}; expected longstr`,
    }
  }
  if (value === 'all' || value === 'any' || value === 'all-with-x' || value === 'any-with-x') {
    return value
  }
  return {
    error: `PRECONDITION_FAILED - Invalid x-match field value '${value}'; expected all, any, all-with-x, or any-with-x`,
  }
}

/**
 * RabbitMQ's headers match: `all` needs every binding header present with an equal value, `any`
 * one; a binding header with no value (`null`) only needs to be present. `all` and `any` skip
 * binding headers that start with `x-`; `all-with-x` and `any-with-x` match them too (only
 * `x-match` itself is skipped). An `all` binding with nothing to match takes every message.
 */
function headersMatch(binding: HeadersMatch, data: ReadonlyMap<string, Wire>): boolean {
  const withX = binding.mode === 'all-with-x' || binding.mode === 'any-with-x'
  const all = binding.mode === 'all' || binding.mode === 'all-with-x'
  let allMatch = true
  let anyMatch = false
  for (const [key, pattern] of binding.table) {
    if (key === 'x-match' || (!withX && key.startsWith('x-'))) continue
    const value = data.get(key)
    if (value !== undefined && (pattern.t === 'void' || looselyEqual(pattern, value))) {
      anyMatch = true
    } else {
      allMatch = false
    }
  }
  return all ? allMatch : anyMatch
}
