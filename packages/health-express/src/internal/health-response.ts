import { describeError, httpStatusOf, toHealthJson, type HealthSource } from '@acemq/core'

/** What the endpoint sends: a status code and the JSON text of the body. */
export interface HealthResponseBody {
  readonly statusCode: 200 | 503
  readonly body: string
}

// `scheme://user:password@` anywhere in a message: the password is replaced, as the
// transport's own description does, in case an error message carries a connection URL.
const URL_CREDENTIALS = /([a-z][a-z0-9+.-]*:\/\/[^\s:/?#@]*:)[^\s@/?#]*@/gi

/** `text` with the password of every URL in it replaced by `***`. */
export function redactCredentials(text: string): string {
  return text.replace(URL_CREDENTIALS, '$1***@')
}

/**
 * Asks `mq` for its health and renders the response. Never rejects: a `health()` that throws
 * becomes a 503 `{"status":"DOWN","error":"..."}` carrying the message only, never a stack.
 */
export async function healthResponse(mq: HealthSource): Promise<HealthResponseBody> {
  try {
    const result = await mq.health()
    return { statusCode: httpStatusOf(result.status), body: JSON.stringify(toHealthJson(result)) }
  } catch (error) {
    return {
      statusCode: 503,
      body: JSON.stringify({ status: 'DOWN', error: redactCredentials(messageOf(error)) }),
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
