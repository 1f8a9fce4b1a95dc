/**
 * Credential redaction: the one place every package hides passwords before text leaves it —
 * health output, error messages, logs, the cli's lines (docs/design.md §9). Adapter authors
 * reach it through `@acemq/core/spi`.
 */

/** What a hidden credential reads as. */
export const REDACTED = '***'

// A URL inside text: a scheme, `://`, and everything up to a space, a quote or an angle bracket.
const EMBEDDED_URL = /[a-z][a-z0-9+.-]*:\/\/[^\s'"<>]+/gi

// A key that names a secret, with any prefix or suffix: `password`, `DB_PASSWORD`, `Pwd`,
// `secret_key`, `access_token`, `api-key`, `apiKey`.
// Bounded, so a long run of word characters costs linear time.
const SECRET_WORD = String.raw`[\w.-]{0,64}?(?:password|passwd|pwd|secret|token|api[_-]?key)[\w-]{0,64}`
const SECRET_NAME = new RegExp(`^${SECRET_WORD}$`, 'i')
// `key=value` (connection strings, query strings): the value runs to a space or a separator,
// or is quoted.
const SECRET_ASSIGNMENT = new RegExp(
  String.raw`\b(${SECRET_WORD})(\s*=\s*)(?:'[^']*'|"[^"]*"|[^\s&;,'"]+)`,
  'gi',
)
// `"key": "value"` (JSON in a message).
const SECRET_JSON_FIELD = new RegExp(String.raw`("${SECRET_WORD}"\s*:\s*)"(?:[^"\\]|\\.)*"`, 'gi')

/**
 * Where the password of a URL is: from the first `:` of the user information to the **last**
 * `@` of the whole URL, or `undefined` when it has none. A password written without
 * percent-encoding may hold `/`, `?`, `#` or `@`, and then the path, query or fragment seem to
 * start inside it; more is hidden rather than less.
 *
 * @example
 * ```ts
 * const span = passwordSpan('amqp://app:s3cret@rabbit') // { start: 11, end: 17 }
 * ```
 */
export function passwordSpan(
  url: string,
): { readonly start: number; readonly end: number } | undefined {
  const schemeEnd = url.indexOf('://')
  if (schemeEnd < 0) return undefined
  const authorityStart = schemeEnd + 3
  const at = url.lastIndexOf('@')
  // An `@` before the authority leaves no colon before it: the check below covers it.
  const colon = url.indexOf(':', authorityStart)
  if (colon < 0 || colon > at) return undefined
  return { start: colon + 1, end: at }
}

/**
 * Returns `url` with the password of its user information (as {@link passwordSpan} finds it)
 * replaced by `***`. Nothing else in a well-formed URL changes; for a URL with an `@` in its
 * path or query (`/team@prod`, write it `%40`), the host is hidden too.
 *
 * @example
 * ```ts
 * redactUrl('amqp://app:s3cret@rabbit:5672/orders') // 'amqp://app:***@rabbit:5672/orders'
 * redactUrl('amqp://rabbit')                          // 'amqp://rabbit'
 * ```
 */
export function redactUrl(url: string): string {
  const span = passwordSpan(url)
  return span === undefined ? url : `${url.slice(0, span.start)}${REDACTED}${url.slice(span.end)}`
}

/**
 * The forms a URL's password may appear in elsewhere — as written, percent-decoded and
 * percent-encoded — longest first, for {@link redactCredentials}' `secrets`; none when the URL
 * has no password.
 *
 * @example
 * ```ts
 * passwordForms('amqp://app:p%40ss@rabbit') // ['p%2540ss', 'p%40ss', 'p@ss']
 * ```
 */
export function passwordForms(url: string): string[] {
  const span = passwordSpan(url)
  if (span === undefined) return []
  const written = url.slice(span.start, span.end)
  const forms = new Set([written, encodeURIComponent(written)])
  try {
    forms.add(decodeURIComponent(written))
  } catch {
    // Not valid percent-encoding: the written form is the password.
  }
  return [...forms].filter((form) => form.length > 0).sort((a, b) => b.length - a.length)
}

/** Whether a key names a secret (`password`, `DB_PASSWORD`, `apiKey`, `access_token`, …). */
export function isSecretName(key: string): boolean {
  return SECRET_NAME.test(key)
}

/**
 * `text` with its credentials replaced by `***`: the password of every URL in it
 * (`amqp://app:***@mq`, as {@link redactUrl} hides it), the value of every secret-looking
 * `key=value` (`password=***`, `Pwd=***;`, `api_key=***&`) or JSON field (`"token":"***"`),
 * and every occurrence of a known `secrets` entry, as given and percent-encoded. Health
 * endpoints pass every detail and error message through it, the transports every error and
 * log line, the cli every line it prints: an error often quotes the connection string it
 * failed with.
 *
 * @example
 * ```ts
 * redactCredentials('connect ECONNREFUSED postgres://app:s3cret@db/x')
 * // 'connect ECONNREFUSED postgres://app:***@db/x'
 * redactCredentials('host=db user=app password=hunter2') // 'host=db user=app password=***'
 * redactCredentials('auth failed for s3cret', ['s3cret']) // 'auth failed for ***'
 * ```
 */
export function redactCredentials(text: string, secrets: readonly string[] = []): string {
  const result = text
    .replace(EMBEDDED_URL, (url) => redactUrl(url))
    .replace(SECRET_ASSIGNMENT, `$1$2${REDACTED}`)
    .replace(SECRET_JSON_FIELD, `$1"${REDACTED}"`)
  return redactSecrets(result, secrets)
}

/**
 * `text` with every occurrence of each of `secrets` (as given and percent-encoded) replaced
 * by `***`, and nothing else touched: for output that carries other people's data, where a
 * field named `token` is theirs, not a credential of ours. Given the `user` name, the name is
 * never hidden, even when the password is the name or part of it, so that a hint such as
 * `rabbitmqctl set_permissions -p 'orders' 'ops' …` stays pasteable: the password is hidden
 * inside `user:password@` always, and elsewhere wherever it appears apart from the name.
 *
 * @example
 * ```ts
 * redactSecrets('login p@ss / p%40ss', ['p@ss']) // 'login *** / ***'
 * redactSecrets("amqp://guest:guest@rabbit 'guest'", ['guest'], 'guest') // "amqp://guest:***@rabbit 'guest'"
 * ```
 */
export function redactSecrets(text: string, secrets: readonly string[], user?: string): string {
  const forms = secrets
    .filter((secret) => secret !== '')
    .flatMap((secret) => {
      const encoded = encodeURIComponent(secret)
      return encoded === secret ? [secret] : [secret, encoded]
    })
  const hide = (part: string, hidden: readonly string[]): string => {
    let result = part
    for (const secret of hidden) result = result.split(secret).join(REDACTED)
    return result
  }
  if (user === undefined || user === '') return hide(text, forms)
  let out = text
  for (const secret of forms) out = out.split(`:${secret}@`).join(`:${REDACTED}@`)
  // A password that holds the user name is hidden whole first; then every form around the name
  // (a part between two names cannot hold one that contains the name).
  out = hide(
    out,
    forms.filter((secret) => secret !== user && secret.includes(user)),
  )
  return out
    .split(user)
    .map((part) => hide(part, forms))
    .join(user)
}
