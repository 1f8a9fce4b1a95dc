import { passwordForms, redactSecrets } from '@acemq/core/spi'

/** Where a command writes: standard output for results, standard error for the rest. */
export interface Output {
  /** Whether results are JSON (`--json`). */
  readonly json: boolean
  /** Writes a result line (human) or a JSON document (`--json`) to standard output. */
  result(human: string, json: unknown): void
  /** Writes a line to standard error. */
  note(line: string): void
  /**
   * Writes a failure as a JSON error object to standard output (`--json`): one document, as a
   * result would be, so a script reads stdout either way.
   */
  error(
    message: string,
    code: string | undefined,
    exitCode: number,
    details?: Readonly<Record<string, unknown>>,
  ): void
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
  /** Other URLs given (`--management-url`) whose passwords are hidden too. */
  readonly otherUrls?: readonly string[]
}): Output {
  const secrets = [options.url, ...(options.otherUrls ?? [])].flatMap((url) =>
    url === undefined ? [] : passwordForms(url),
  )
  const user = userOf(options.url)
  const redact = (text: string): string => redactSecrets(text, secrets, user)
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
    error(message, code, exitCode, details = {}) {
      const error = { message, ...(code === undefined ? {} : { code }), exitCode, ...details }
      process.stdout.write(redact(`${JSON.stringify({ error }, jsonValue, 2)}\n`))
    },
  }
}

/** The user name of `url`, decoded; undefined when it has none. */
function userOf(url: string | undefined): string | undefined {
  if (url === undefined) return undefined
  const schemeEnd = url.indexOf('://')
  const at = url.lastIndexOf('@')
  if (schemeEnd < 0 || at < schemeEnd) return undefined
  const info = url.slice(schemeEnd + 3, at)
  const raw = info.split(':')[0] ?? ''
  try {
    return decodeURIComponent(raw)
  } catch {
    return raw
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
