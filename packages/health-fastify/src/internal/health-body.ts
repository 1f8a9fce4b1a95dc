import {
  describeError,
  httpStatusOf,
  toHealthJson,
  type HealthJson,
  type HealthSource,
} from '@acemq/core'

/** The body served when `health()` itself fails. */
export interface HealthErrorJson {
  readonly status: 'DOWN'
  readonly error: string
}

/** What the endpoint answers, and the error behind a failed `health()` for the log. */
export interface HealthAnswer {
  readonly statusCode: 200 | 503
  readonly body: HealthJson | HealthErrorJson
  readonly error?: unknown
}

// `scheme://user:password@` anywhere in a message: the password is replaced, as the
// transport's own description does, in case an error message carries a connection URL.
const URL_CREDENTIALS = /([a-z][a-z0-9+.-]*:\/\/[^\s:/?#@]*:)[^\s@/?#]*@/gi

/** `text` with the password of every URL in it replaced by `***`. */
export function redactCredentials(text: string): string {
  return text.replace(URL_CREDENTIALS, '$1***@')
}

/**
 * Asks `mq` for its health. Never rejects: a `health()` that throws becomes a 503
 * `{"status":"DOWN","error":"..."}` carrying the message only, never a stack.
 */
export async function healthAnswer(mq: HealthSource): Promise<HealthAnswer> {
  try {
    const result = await mq.health()
    return { statusCode: httpStatusOf(result.status), body: toHealthJson(result) }
  } catch (error) {
    return {
      statusCode: 503,
      body: { status: 'DOWN', error: redactCredentials(messageOf(error)) },
      error,
    }
  }
}

function messageOf(error: unknown): string {
  try {
    return describeError(error) || 'health() failed'
  } catch {
    // An error whose message getter throws still gets an answer.
    return 'health() failed'
  }
}
