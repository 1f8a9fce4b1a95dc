/** How long an unconfirmed idempotency claim lives before another consumer may take it over (5 min, the same in every AceMQ library). */
export const DEFAULT_CLAIM_TIMEOUT = 300_000

/** How long an idempotency store remembers a confirmed id, so that a redelivery of it is a duplicate (1 day). */
export const DEFAULT_IDEMPOTENCY_RETENTION = 86_400_000

/** How long `close()` and `await using` drain running handlers before closing (20 s, inside Kubernetes' 30 s grace period). */
export const DEFAULT_DRAIN_TIMEOUT = 20_000

/** How long a consumer waits before putting back a message someone else is still handling (5 s). */
export const DEFAULT_IN_PROGRESS_DELAY = 5_000

/** A retry wait at or above this is spent in a broker rung queue rather than in the consumer (30 s). */
export const DEFAULT_BROKER_WAIT_THRESHOLD = 30_000

/** How long a failed message waits before it is retried when the consumer has no retry policy (5 s). */
export const DEFAULT_RETRY_DELAY = 5_000

/** How long closing waits for handlers that are still running after their signal was aborted (5 s). */
export const HANDLER_ABANDON_TIMEOUT = 5_000

/** How many publishes may wait for their broker confirm at once (1000). */
export const DEFAULT_MAX_UNCONFIRMED = 1_000

/** How many deliveries a consumer may hold unacknowledged (20). */
export const DEFAULT_PREFETCH = 20

/** How many handlers of one consumer run at once (1: one at a time keeps order). */
export const DEFAULT_CONCURRENCY = 1

/** The exchange dead-letter and parked queues are bound to. */
export const DEAD_LETTER_EXCHANGE = 'acemq.dlx'

/** The exchange rung queues dead-letter into, bound back to each source queue. */
export const RETRY_EXCHANGE = 'acemq.retry'

/**
 * How long a paused consumer holds the deliveries that reached its gate before it hands them
 * back and lets go of its subscription until consuming resumes (60 s): well inside RabbitMQ's
 * `consumer_timeout` (30 min by default), which would otherwise close the channel.
 */
export const DEFAULT_HELD_TIMEOUT = 60_000

/** How long one idempotency-store call may take before it counts as a store failure (10 s). */
export const DEFAULT_STORE_TIMEOUT = 10_000

/**
 * How often the default `onError` prints one kind of failure (60 s): the first time at once,
 * then at most once per interval with the count of repeats held back.
 */
export const DEFAULT_ERROR_REPORT_INTERVAL = 60_000
