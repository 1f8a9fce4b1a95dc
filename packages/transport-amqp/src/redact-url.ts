/**
 * Returns `url` with the password in its user information replaced by `***`, so that it can be
 * shown in health output, logs and error messages. Nothing else in a well-formed URL changes.
 *
 * A password written without percent-encoding may hold `/`, `?`, `#` or `@`, and then the path,
 * query or fragment seem to start inside it: so everything from the first `:` of the user
 * information to the **last** `@` of the whole URL is hidden. More is hidden rather than less —
 * for a URL with an `@` in its path or query (`/team@prod`, write it `%40`), the host is hidden too.
 *
 * @example
 * ```ts
 * redactUrl('amqp://app:s3cret@rabbit:5672/orders') // 'amqp://app:***@rabbit:5672/orders'
 * redactUrl('amqp://app:pa?ss@rabbit/orders')        // 'amqp://app:***@rabbit/orders'
 * redactUrl('amqp://rabbit')                          // 'amqp://rabbit'
 * ```
 */
export function redactUrl(url: string): string {
  const span = passwordSpan(url)
  return span === undefined ? url : `${url.slice(0, span.start)}***${url.slice(span.end)}`
}

/**
 * Where the password of `url` is (as {@link redactUrl} reads it: from the first `:` after the
 * scheme to the last `@`), or `undefined` when it has none.
 */
export function passwordSpan(
  url: string,
): { readonly start: number; readonly end: number } | undefined {
  const schemeEnd = url.indexOf('://')
  if (schemeEnd < 0) return undefined
  const authorityStart = schemeEnd + 3
  const at = url.lastIndexOf('@')
  if (at < authorityStart) return undefined
  const colon = url.indexOf(':', authorityStart)
  if (colon < 0 || colon > at) return undefined
  return { start: colon + 1, end: at }
}
