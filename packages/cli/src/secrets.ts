/**
 * Where the password of an `amqp://` URL is: from the first `:` of the user information to the
 * last `@` (a password written without percent-encoding may hold `/`, `?`, `#` or `@`).
 */
export function passwordSpanOf(
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
