import { redactCredentials } from '@acemq/core/spi'

/**
 * Removes secrets from text that is about to leave the transport (an error message, a log
 * line): core's {@link redactCredentials}, with the connection's known passwords.
 */
export function scrubSecrets(text: string, secrets: readonly string[]): string {
  return redactCredentials(text, secrets)
}

function mentionsSecret(text: string | undefined, secrets: readonly string[]): boolean {
  return text !== undefined && scrubSecrets(text, secrets) !== text
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
