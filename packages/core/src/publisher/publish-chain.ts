import { assertApplicationHeaders } from '../envelope/envelope.js'
import { ConfigurationError } from '../errors.js'
import type { OutgoingPublish, PublishInterceptor } from '../consumer/interceptor.js'
import type { Instrumentation } from '../telemetry/instrumentation.js'

/** What the publish interceptors' reports need from the connection. */
export interface PublishChainHost {
  readonly instrumentation: Instrumentation | undefined
  reportError(error: unknown, context: string): void
}

/**
 * Runs every `beforePublish` in order, each seeing what the one before left: the publish as
 * the interceptors changed it. A throw rejects the send (nothing is written).
 */
export async function beforePublish(
  list: readonly PublishInterceptor[],
  publish: OutgoingPublish,
): Promise<OutgoingPublish> {
  let current = publish
  for (const interceptor of list) {
    if (interceptor.beforePublish === undefined) continue
    const changes = await interceptor.beforePublish(current)
    if (changes === undefined || changes === null) continue
    const name = interceptor.name ?? 'interceptor'
    const envelope = changes.envelope
    if (envelope !== undefined && (typeof envelope.id !== 'string' || envelope.id === '')) {
      throw new ConfigurationError(
        `${name}'s beforePublish envelope must have a non-empty string id; got ${String(envelope.id)}`,
      )
    }
    if (changes.headers !== undefined) {
      assertApplicationHeaders(changes.headers, `${name}'s beforePublish headers`)
    }
    current = {
      ...current,
      envelope: changes.envelope ?? current.envelope,
      headers: changes.headers ?? current.headers,
    }
  }
  return current
}

/** Runs every `afterConfirm` (no `error`) or `onPublishError`; a throw is reported, nothing more. */
export async function afterPublish(
  host: PublishChainHost,
  list: readonly PublishInterceptor[],
  publish: OutgoingPublish,
  error?: unknown,
): Promise<void> {
  const failed = error !== undefined
  const phase = failed ? 'onPublishError' : 'afterConfirm'
  for (const interceptor of list) {
    try {
      if (failed) await interceptor.onPublishError?.(publish, error)
      else await interceptor.afterConfirm?.(publish)
    } catch (failure) {
      const name = interceptor.name ?? 'interceptor'
      const where = `${publish.exchange === '' ? '(default)' : publish.exchange}/${publish.routingKey}`
      host.instrumentation?.interceptorFailed?.({ interceptor: name, phase, queue: where })
      host.reportError(
        failure,
        `${name} failed in ${phase} of message ${publish.envelope.id} to ${where}; the result stands`,
      )
    }
  }
}
