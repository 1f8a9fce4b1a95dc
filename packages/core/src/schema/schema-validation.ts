import { AceMqError, ConfigurationError } from '../errors.js'
import { ErrorCodes } from '../error-codes.js'
import type { Handler, Message } from '../consumer/message.js'
import type { StandardSchemaV1 } from './standard-schema.js'

/** At most this many issues are spelled out in a reason; the rest are counted. */
export const MAX_LISTED_ISSUES = 10
/** A reason listing issues is at most this many characters, however many issues there are. */
export const MAX_ISSUES_REASON_LENGTH = 1_000
const MAX_ISSUE_LENGTH = 200

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`
}

function segmentOf(segment: PropertyKey | StandardSchemaV1.PathSegment): PropertyKey {
  return typeof segment === 'object' && segment !== null ? segment.key : segment
}

function pathOf(issue: StandardSchemaV1.Issue): string {
  const path = Array.isArray(issue.path) ? issue.path : []
  if (path.length === 0) return '(root)'
  let text = ''
  for (const raw of path as readonly (PropertyKey | StandardSchemaV1.PathSegment)[]) {
    const key = segmentOf(raw)
    if (typeof key === 'number') text += `[${key}]`
    else text += text === '' ? String(key) : `.${String(key)}`
  }
  return text
}

/**
 * The issues as one line — `path: message; path: message; … and N more` — with at most
 * {@link MAX_LISTED_ISSUES} issues spelled out and never more than
 * {@link MAX_ISSUES_REASON_LENGTH} characters, so that ten thousand issues do not make a header
 * the broker refuses (docs/design.md §26).
 *
 * @example
 * ```ts
 * describeIssues([{ message: 'Required', path: ['items', 0, 'sku'] }]) // 'items[0].sku: Required'
 * ```
 */
export function describeIssues(issues: readonly StandardSchemaV1.Issue[]): string {
  const parts: string[] = []
  let length = 0
  let listed = 0
  for (const issue of issues) {
    if (listed === MAX_LISTED_ISSUES) break
    const message = typeof issue.message === 'string' ? issue.message : String(issue.message)
    const part = clip(`${pathOf(issue)}: ${message}`, MAX_ISSUE_LENGTH)
    // Room for the separator and the "… and N more" tail.
    if (length + part.length + 2 > MAX_ISSUES_REASON_LENGTH - 40) break
    parts.push(part)
    length += part.length + 2
    listed += 1
  }
  const rest = issues.length - listed
  const text = parts.join('; ')
  return rest > 0 ? `${text}; … and ${rest} more issue(s)` : text
}

/**
 * A payload its schema refused. Consuming, the engine dead-letters the message to
 * `{queue}.dlq` at once, never retrying it, with outcome `invalid`; publishing, nothing was
 * written. `issues` holds every issue; the message lists a bounded number of them.
 *
 * @example
 * ```ts
 * catch (e) { if (errorCodeOf(e) === ErrorCodes.INVALID_PAYLOAD) console.log(e.issues) }
 * ```
 */
export class SchemaValidationError extends AceMqError {
  constructor(readonly issues: readonly StandardSchemaV1.Issue[]) {
    super(`invalid payload (${issues.length} issue(s)): ${describeIssues(issues)}`, {
      code: ErrorCodes.INVALID_PAYLOAD,
    })
  }
}

/** Throws a {@link ConfigurationError} unless `schema` implements Standard Schema v1. */
export function assertStandardSchema(schema: unknown, name: string): void {
  const props: unknown =
    typeof schema === 'object' || typeof schema === 'function'
      ? (schema as { '~standard'?: unknown } | null)?.['~standard']
      : undefined
  if (
    typeof props !== 'object' ||
    props === null ||
    (props as { version?: unknown }).version !== 1 ||
    typeof (props as { validate?: unknown }).validate !== 'function'
  ) {
    throw new ConfigurationError(
      `${name} must be a Standard Schema (an object with a '~standard' property of version 1, as zod, valibot and arktype make); got ${String(schema)}`,
    )
  }
}

function isPromiseLike<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof (value as { then?: unknown } | null)?.then === 'function'
}

function checked<Output>(result: StandardSchemaV1.Result<Output>): Output {
  if (result.issues !== undefined) throw new SchemaValidationError(result.issues)
  return result.value
}

/**
 * Validates `value`: the schema's output, or a {@link SchemaValidationError} naming the issues.
 * Synchronous when the schema is; a schema that throws throws its own error (a failure of the
 * code, not of the payload).
 */
export function validateWith<S extends StandardSchemaV1>(
  schema: S,
  value: unknown,
): StandardSchemaV1.InferOutput<S> | Promise<StandardSchemaV1.InferOutput<S>> {
  // `validate` is called as a method: some libraries read `this`.
  const result = schema['~standard'].validate(value) as
    | StandardSchemaV1.Result<StandardSchemaV1.InferOutput<S>>
    | Promise<StandardSchemaV1.Result<StandardSchemaV1.InferOutput<S>>>
  return isPromiseLike(result) ? Promise.resolve(result).then(checked) : checked(result)
}

/**
 * A handler that validates each payload with `schema` before `handler` sees it; the handler's
 * payload type is the schema's output. A payload the schema refuses is never retried: it goes
 * to `{queue}.dlq` with the issues as the reason (outcome `invalid`). A schema that throws is a
 * handler failure, retried like any other. Async schemas work.
 *
 * @example
 * ```ts
 * const Order = z.object({ id: z.string(), total: z.number() })
 * await mq.consume('orders', ConsumerOptions.defaults(), withSchema(Order, async (message) => {
 *   message.payload.total // number
 * }))
 * ```
 */
export function withSchema<S extends StandardSchemaV1>(
  schema: S,
  handler: Handler<StandardSchemaV1.InferOutput<S>>,
): Handler<unknown> {
  assertStandardSchema(schema, 'withSchema(schema)')
  if (typeof handler !== 'function') {
    throw new ConfigurationError(`withSchema(handler) must be a function; got ${String(handler)}`)
  }
  return (message, context) => {
    const valid = validateWith(schema, message.payload)
    const typed = (payload: StandardSchemaV1.InferOutput<S>) =>
      handler({ ...message, payload } as Message<StandardSchemaV1.InferOutput<S>>, context)
    return isPromiseLike(valid) ? valid.then(typed) : typed(valid)
  }
}
