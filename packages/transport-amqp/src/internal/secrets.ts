import { redactUrl } from '../redact-url.js'

const EMBEDDED_URL = /[a-z][a-z0-9+.-]*:\/\/[^\s'"<>]+/gi

/**
 * Removes secrets from text that is about to leave the transport (an error message, a log
 * line): every embedded URL is redacted, and every occurrence of a known password (raw or
 * percent-encoded) is replaced by `***`.
 */
export function scrubSecrets(text: string, secrets: readonly string[]): string {
  let result = text.replace(EMBEDDED_URL, (match) => redactUrl(match))
  for (const secret of secrets) {
    if (secret === '') continue
    result = result.split(secret).join('***')
    const encoded = encodeURIComponent(secret)
    if (encoded !== secret) result = result.split(encoded).join('***')
  }
  return result
}

function mentionsSecret(text: string | undefined, secrets: readonly string[]): boolean {
  if (text === undefined) return false
  if (scrubSecrets(text, []) !== text) return true
  return secrets.some(
    (secret) =>
      secret !== '' && (text.includes(secret) || text.includes(encodeURIComponent(secret))),
  )
}

/**
 * Makes an error from amqplib or the socket safe to carry as a `cause`: returned unchanged when
 * neither its message nor its stack mentions a secret, otherwise replaced by a copy whose
 * message is scrubbed (name and `code` kept, stack dropped).
 */
export function sanitizeError(error: unknown, secrets: readonly string[]): unknown {
  if (!(error instanceof Error)) {
    return typeof error === 'string' ? scrubSecrets(error, secrets) : error
  }
  if (!mentionsSecret(error.message, secrets) && !mentionsSecret(error.stack, secrets)) {
    return error
  }
  const copy = new Error(scrubSecrets(error.message, secrets))
  copy.name = error.name
  copy.stack = `${copy.name}: ${copy.message}`
  const code: unknown = (error as { code?: unknown }).code
  if (code !== undefined) Object.assign(copy, { code })
  return copy
}
