import { readFileSync } from 'node:fs'
import path from 'node:path'
import { expect } from 'vitest'
import { ErrorCodes, type Codec } from '@acemq/core'
import { FIXTURES_DIR } from '../packages/core/test/fixtures.js'

/** One body from `fixtures/codec-samples.json`: what a Java or Go codec wrote, and its value. */
export interface CodecSample {
  readonly format: string
  readonly producer: string
  readonly content_type: string
  readonly body_base64: string
  readonly expected: unknown
}

/** `fixtures/codec-samples.json`: the family's codec samples and the schemas they were written with. */
export interface CodecSamples {
  readonly avro_schema: Record<string, unknown>
  readonly proto_schema: string
  readonly samples: readonly CodecSample[]
}

/** The family's codec samples, read as they are stored (the file is never edited). */
export const codecSamples: CodecSamples = JSON.parse(
  readFileSync(path.join(FIXTURES_DIR, 'codec-samples.json'), 'utf8'),
) as CodecSamples

/**
 * The samples of one format, each with its body as bytes. Throws when the fixture has none, so a
 * test over them can never pass by testing nothing.
 */
export function samplesOf(format: string): (CodecSample & { readonly body: Uint8Array })[] {
  const found = codecSamples.samples
    .filter((sample) => sample.format === format)
    .map((sample) => ({ ...sample, body: Buffer.from(sample.body_base64, 'base64') }))
  if (found.length === 0) throw new Error(`fixtures/codec-samples.json has no '${format}' sample`)
  return found
}

/**
 * Asserts that `codec.decode(body)` throws a decode error (`ACEMQ_DECODE`) whose message matches
 * `reason` and fits on one line, as the reason of a parked message must.
 */
export function expectDecodeFailure(codec: Codec, body: Uint8Array, reason: RegExp): void {
  let thrown: unknown
  try {
    codec.decode(body)
  } catch (error) {
    thrown = error
  }
  expect(thrown).toMatchObject({ code: ErrorCodes.DECODE, message: expect.stringMatching(reason) })
  expect((thrown as Error).message).not.toContain('\n')
}
