import type { DeliveryHook } from '../consumer/delivery-hook.js'

export type { HoldEnd, InPlaceStep } from '../consumer/delivery-hook.js'

/**
 * What an ordered consumer hands the engine (internal to core): the in-place members of the
 * engine's seam ({@link DeliveryHook}). A delivery whose handler fails is never put back; the
 * engine holds it and runs the handler again in place, halts, or gives up, as `failed` decides.
 */
export type InPlaceFailures = Required<Pick<DeliveryHook, 'failed' | 'holdEnded'>>
