import type { AsyncLocalStorage } from 'node:async_hooks'
import { describeError } from '../errors.js'
import { ErrorCodes, errorCodeOf } from '../error-codes.js'
import type { ProcessScope } from '../telemetry/instrumentation.js'
import { isAckResult, type AckResult } from './ack.js'
import type { DeliveryTask, Handling } from './delivery-task.js'
import type { Handler, HandlerContext, Message } from './message.js'

const ACCEPT: AckResult = Object.freeze({ kind: 'accept' })

/**
 * Runs the handler as `task` (what `currentTask` answers inside it) and reads what it returned.
 * Not async: what a handler returns without a promise is read at once, with no promise made for
 * it (on Node 20 every promise also runs the AsyncLocalStorage's hooks).
 */
export function runHandler<T>(
  currentTask: AsyncLocalStorage<DeliveryTask | undefined>,
  handler: Handler<T>,
  context: HandlerContext,
  { task, scope }: Handling,
  message: Message<T>,
): AckResult | Promise<AckResult> {
  const started = scope === undefined ? 0 : performance.now()
  let returned: unknown
  try {
    // No closure per message: run() passes the arguments on.
    returned = currentTask.run(task, invokeHandler, handler, message, context, scope)
  } catch (error) {
    return handlerFailed(error, scope, started)
  }
  if (!isThenable(returned)) return handlerReturned(returned, scope, started)
  return Promise.resolve(returned).then(
    (value) => handlerReturned(value, scope, started),
    (error: unknown) => handlerFailed(error, scope, started),
  )
}

/** A handler that returned (or resolved): its result, or accept for anything but an `Ack`. */
function handlerReturned(
  returned: unknown,
  scope: ProcessScope | undefined,
  started: number,
): AckResult {
  scope?.handled(performance.now() - started, undefined)
  return isAckResult(returned) ? returned : ACCEPT
}

/** The dead-letter results made for a payload its schema refused: their outcome is `invalid`. */
const INVALID_RESULTS = new WeakSet<AckResult>()

/** Whether `result` dead-letters a payload its schema refused (outcome `invalid`). */
export function isInvalidPayload(result: AckResult): boolean {
  return INVALID_RESULTS.has(result)
}

/** A handler that threw (or rejected): `FatalError` dead-letters, anything else retries. */
function handlerFailed(
  error: unknown,
  scope: ProcessScope | undefined,
  started: number,
): AckResult {
  scope?.handled(performance.now() - started, error)
  const code = errorCodeOf(error)
  if (code === ErrorCodes.FATAL) return { kind: 'dead-letter', reason: describeError(error) }
  if (code === ErrorCodes.INVALID_PAYLOAD) {
    // A payload its schema refused: dead-lettered like a FatalError, counted `invalid`
    // (docs/design.md §26).
    const invalid: AckResult = { kind: 'dead-letter', reason: describeError(error) }
    INVALID_RESULTS.add(invalid)
    return invalid
  }
  return { kind: 'retry', reason: describeError(error), delayMs: undefined }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  )
}

/** Calls the handler, inside the instrumentation's scope when there is one. */
function invokeHandler<T>(
  handler: Handler<T>,
  message: Message<T>,
  context: HandlerContext,
  scope: ProcessScope | undefined,
): ReturnType<Handler<T>> {
  return scope === undefined
    ? handler(message, context)
    : scope.run(() => handler(message, context))
}
