import { passwordForms, redactSecrets } from '@acemq/core/spi'

/** Where a command writes: standard output for results, standard error for the rest. */
export interface Output {
  /** Whether results are JSON (`--json`). */
  readonly json: boolean
  /** Writes a result line (human) or a JSON document (`--json`) to standard output. */
  result(human: string, json: unknown): void
  /** Writes a line to standard error. */
  note(line: string): void
  /** Hides the password of `url` wherever it appears in `text`. */
  redact(text: string): string
}

/**
 * The output of one run: every line goes through {@link Output.redact}, so a password given in
 * `--url` (raw or percent-encoded) is never printed, whatever an error message carries.
 */
export function createOutput(options: {
  readonly json: boolean
  readonly url?: string | undefined
}): Output {
  // Only the password itself: the lines carry messages, whose own fields are not secrets of ours.
  const secrets = options.url === undefined ? [] : passwordForms(options.url)
  const redact = (text: string): string => redactSecrets(text, secrets)
  return {
    json: options.json,
    redact,
    result(human, json) {
      process.stdout.write(
        redact(options.json ? `${JSON.stringify(json, jsonValue, 2)}\n` : `${human}\n`),
      )
    },
    note(line) {
      process.stderr.write(`${redact(line)}\n`)
    },
  }
}

/** JSON for values JSON has no form of: bytes as UTF-8 text, bigints as numbers. */
function jsonValue(_key: string, value: unknown): unknown {
  if (typeof value === 'bigint') return Number(value)
  if (value instanceof Uint8Array) return Buffer.from(value).toString('utf8')
  if (
    typeof value === 'object' &&
    value !== null &&
    (value as { type?: unknown }).type === 'Buffer' &&
    Array.isArray((value as { data?: unknown }).data)
  ) {
    return Buffer.from((value as { data: number[] }).data).toString('utf8')
  }
  return value
}
