import { ConfigurationError } from '@acemq/core'
import { decodeFailure, describeError } from '@acemq/core/spi'
import avro, { type Schema, type Type } from 'avsc'

/** An Avro schema as JSON (`{ type: 'record', … }`) or a type avsc already built from one. */
export type AvroSchema = Schema

// How many invalid fields an encode error lists; the rest are counted.
const LISTED_FIELDS = 5

/** The avsc type of `schema`, or a ConfigurationError naming `argument` and why. */
export function avroType(schema: unknown, argument: string): Type {
  const type = readType(schema, argument)
  if (usesLong(type)) withLong.add(type)
  return type
}

function readType(schema: unknown, argument: string): Type {
  if (avro.Type.isType(schema)) return schema as Type
  if (schema === null || (typeof schema !== 'object' && typeof schema !== 'string')) {
    throw new ConfigurationError(
      `${argument} must be an Avro schema (an object such as { type: 'record', … }) or an avsc Type; got ${String(schema)}`,
    )
  }
  try {
    return avro.Type.forSchema(schema as Schema)
  } catch (error) {
    throw new ConfigurationError(
      `${argument} is not a valid Avro schema: ${describeError(error)}`,
      {
        cause: error,
      },
    )
  }
}

// avsc writes a long below -2^52 as a different number without a word (-4503599627370497 reads
// back as 4503599627370496), though it calls the value valid. A schema with a long therefore has
// each encoding read back before it is sent.
const withLong = new WeakSet<Type>()

function usesLong(type: Type): boolean {
  return /"long"/.test(JSON.stringify(type.schema()))
}

/** The Avro binary encoding of `value`, or a ConfigurationError listing the fields that do not fit. */
export function encodeAvro(type: Type, value: unknown): Buffer {
  const invalid: string[] = []
  const valid = type.isValid(value, {
    errorHook: (path, got, expected) => {
      invalid.push(
        `${path.join('.') || '(the value)'} = ${preview(got)} is not ${expected.typeName}`,
      )
    },
  })
  if (!valid) {
    const more =
      invalid.length > LISTED_FIELDS ? `, and ${invalid.length - LISTED_FIELDS} more` : ''
    throw new ConfigurationError(
      `payload does not fit the Avro schema ${type.name ?? type.typeName}: ${invalid.slice(0, LISTED_FIELDS).join('; ')}${more}`,
    )
  }
  const body = type.toBuffer(value)
  if (withLong.has(type) && type.compare(type.fromBuffer(body), value) !== 0) {
    throw new ConfigurationError(
      `payload cannot be written as Avro exactly: a long below -4503599627370496 (-2^52) would be sent as another number; keep longs within ±2^52 or send such values as strings`,
    )
  }
  return body
}

/** The value Avro binary `body` holds, or a decode error saying why not. */
export function decodeAvro(type: Type, body: Uint8Array, what: string): unknown {
  const bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength)
  try {
    return type.fromBuffer(bytes)
  } catch (error) {
    throw decodeFailure(
      `the body is not ${what} of ${type.name ?? type.typeName} (${body.length} byte(s)): ${describeError(error)}`,
      error,
    )
  }
}

function preview(value: unknown): string {
  if (typeof value === 'bigint') return `${value}n`
  try {
    const text = JSON.stringify(value) ?? String(value)
    return text.length > 40 ? `${text.slice(0, 40)}…` : text
  } catch {
    return String(value)
  }
}
