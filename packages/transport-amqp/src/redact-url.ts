/**
 * Returns `url` with the password in its user information replaced by `***`, so that it can be
 * shown in health output, logs and error messages. Nothing else in the URL changes. When the
 * URL is malformed (an unescaped `@` or `/` in the password), more is hidden rather than less:
 * everything between the first `:` of the user information and the last `@` before the query.
 *
 * @example
 * ```ts
 * redactUrl('amqp://app:s3cret@rabbit:5672/orders') // 'amqp://app:***@rabbit:5672/orders'
 * redactUrl('amqp://rabbit')                          // 'amqp://rabbit'
 * ```
 */
export function redactUrl(url: string): string {
  const schemeEnd = url.indexOf('://')
  if (schemeEnd < 0) return url
  const authorityStart = schemeEnd + 3
  const queryStart = url.indexOf('?', authorityStart)
  const searchEnd = queryStart < 0 ? url.length : queryStart
  const at = url.lastIndexOf('@', searchEnd - 1)
  if (at < authorityStart) return url
  const colon = url.indexOf(':', authorityStart)
  if (colon < 0 || colon > at) return url
  return `${url.slice(0, colon + 1)}***${url.slice(at)}`
}
