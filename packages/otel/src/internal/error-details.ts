import { SpanStatusCode, type Exception, type Span } from '@opentelemetry/api'
import { ACEMQ_ATTRIBUTES } from '../names.js'

/** `error.type` for a failure: the stable AceMQ code when there is one, else the class name. */
export function errorType(error: unknown): string {
  if (typeof error === 'object' && error !== null) {
    const code = (error as { readonly code?: unknown }).code
    if (typeof code === 'string' && code !== '') return code
    if (error instanceof Error) return error.name
  }
  return '_OTHER'
}

/** Marks `span` failed by `error`: an exception event, `error.type` and an ERROR status. */
export function recordError(span: Span, error: unknown): void {
  const exception: Exception =
    error instanceof Error ? error : { name: errorType(error), message: String(error) }
  span.recordException(exception)
  span.setAttribute(ACEMQ_ATTRIBUTES.errorType, errorType(error))
  span.setStatus({
    code: SpanStatusCode.ERROR,
    message: error instanceof Error ? error.message : String(error),
  })
}
