import { passwordSpanOf } from './secrets.js'

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
}): Output {
  const secrets = secretsOf(options.url)
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

/**
 * Hides every form of the password in `text`, never the user name: a hint such as
 * `rabbitmqctl set_permissions -p 'orders' 'ops' …` must stay pasteable, even when the password
 * is the user name (`guest:guest`) or part of it. The password is hidden wherever it appears
 * apart from the user name, and inside `user:password@` always.
 */
export function redactSecrets(
  text: string,
  secrets: readonly string[],
  user: string | undefined,
): string {
  let out = text
  for (const secret of secrets) out = out.split(`:${secret}@`).join(':***@')
  const hide = (part: string, forms: readonly string[]): string => {
    let result = part
    for (const secret of forms) result = result.split(secret).join('***')
    return result
  }
  if (user === undefined || user === '') return hide(out, secrets)
  // A password that holds the user name is hidden whole first; the others around the name.
  out = hide(
    out,
    secrets.filter((secret) => secret !== user && secret.includes(user)),
  )
  const rest = secrets.filter((secret) => !secret.includes(user))
  return out
    .split(user)
    .map((part) => hide(part, rest))
    .join(user)
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

/** The password of `url`, as written and decoded, longest first. */
function secretsOf(url: string | undefined): string[] {
  if (url === undefined) return []
  const span = passwordSpanOf(url)
  if (span === undefined) return []
  const raw = url.slice(span.start, span.end)
  const forms = new Set([raw])
  try {
    forms.add(decodeURIComponent(raw))
  } catch {
    // Not valid percent-encoding: the raw form is the password.
  }
  forms.add(encodeURIComponent(raw))
  return [...forms].filter((form) => form.length > 0).sort((a, b) => b.length - a.length)
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
