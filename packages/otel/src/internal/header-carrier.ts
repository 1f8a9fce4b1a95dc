import type { TextMapGetter, TextMapSetter } from '@opentelemetry/api'
import type { Headers } from '@acemq/core'

const utf8 = new TextDecoder()

/** A header value as text: AMQP strings may arrive as Buffers (long strings, byte arrays). */
function text(value: unknown): string | undefined {
  if (typeof value === 'string') return value
  if (value instanceof Uint8Array) return utf8.decode(value)
  return undefined
}

/**
 * Reads trace context from message headers. Lookups are exact (`traceparent`, `tracestate`
 * are lower case on the wire); Buffer and byte-array values are decoded as UTF-8, arrays
 * element by element.
 */
export const headerGetter: TextMapGetter<Readonly<Headers>> = {
  keys(carrier) {
    return Object.keys(carrier)
  },
  get(carrier, key) {
    const value = carrier[key]
    if (Array.isArray(value)) {
      const values: string[] = []
      for (const item of value) {
        const decoded = text(item)
        if (decoded !== undefined) values.push(decoded)
      }
      return values
    }
    return text(value)
  },
}

/** Writes trace context into message headers as plain strings. */
export const headerSetter: TextMapSetter<Headers> = {
  set(carrier, key, value) {
    carrier[key] = value
  },
}
