import type { DeliveryHook } from '../consumer/delivery-hook.js'

export type { Hop } from '../consumer/delivery-hook.js'

/**
 * What a pipeline step hands the engine (internal to core): the members of the engine's seam
 * ({@link DeliveryHook}) a step uses. A step's consumer is an ordinary engine consumer whose
 * idempotency key is `{pipeline}.{step}:{id}` (with the route position when the route revisits
 * the step; `arrived` comes just before `claimKey`, since the route decides the key), and whose accepted deliveries are settled in this order: the
 * next step's message is published and confirmed, the claim is confirmed, then the delivery is
 * acked. A crash between any two of them hands the delivery back, and an idempotent step finds
 * its claim (live or confirmed) when it comes back.
 */
export type StepHook = Required<Pick<DeliveryHook, 'claimKey' | 'arrived' | 'nextHop' | 'acked'>>
