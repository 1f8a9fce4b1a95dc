/**
 * The Standard Schema interface (https://standardschema.dev), version 1: what zod, valibot,
 * arktype and others implement under the `~standard` key. Written out here, types only, so
 * that no schema library is a dependency of `@acemq/core` (docs/design.md §26).
 *
 * @example
 * ```ts
 * import { z } from 'zod'
 * const Order = z.object({ id: z.string() })
 * const schema: StandardSchemaV1<unknown, { id: string }> = Order
 * ```
 */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly '~standard': StandardSchemaV1.Props<Input, Output>
}

// The namespace mirrors the published spec, so a schema of any library is assignable to it.
// eslint-disable-next-line @typescript-eslint/no-namespace
export declare namespace StandardSchemaV1 {
  /** What the `~standard` key holds. */
  export interface Props<Input = unknown, Output = Input> {
    readonly version: 1
    readonly vendor: string
    readonly validate: (value: unknown) => Result<Output> | Promise<Result<Output>>
    readonly types?: Types<Input, Output> | undefined
  }
  /** A validation's result: the value, or the issues. */
  export type Result<Output> = SuccessResult<Output> | FailureResult
  export interface SuccessResult<Output> {
    readonly value: Output
    readonly issues?: undefined
  }
  export interface FailureResult {
    readonly issues: readonly Issue[]
  }
  /** One thing wrong with the value, and where. */
  export interface Issue {
    readonly message: string
    readonly path?: readonly (PropertyKey | PathSegment)[] | undefined
  }
  export interface PathSegment {
    readonly key: PropertyKey
  }
  export interface Types<Input = unknown, Output = Input> {
    readonly input: Input
    readonly output: Output
  }
  /** The type a schema accepts. */
  export type InferInput<Schema extends StandardSchemaV1> = NonNullable<
    Schema['~standard']['types']
  >['input']
  /** The type a schema produces. */
  export type InferOutput<Schema extends StandardSchemaV1> = NonNullable<
    Schema['~standard']['types']
  >['output']
}
