/** What the publishing side knows of one message. */
export interface Published {
  readonly id: string
  /** The library reported the publish confirmed (at least once). */
  readonly confirmed: boolean
}

/** The verdict on a whole run: what was published against the side effects in Postgres. */
export interface DeliveryCheck {
  readonly published: number
  readonly confirmed: number
  /** Published and never reported confirmed (every send failed, or the run gave up). */
  readonly failed: number
  /** Ids with at least one side effect. */
  readonly handled: number
  /** Side-effect rows. */
  readonly effects: number
  /** Confirmed and never handled: must be 0. */
  readonly lost: readonly string[]
  /** Handled more than once (confirmed or not): must be 0 with the store. */
  readonly duplicated: readonly string[]
  /** Reported failed but handled (once): allowed — at most once. */
  readonly failedButHandled: number
  /** Side effects of ids nobody published: must be 0. */
  readonly unknown: readonly string[]
}

/**
 * Checks a run: every publish reported confirmed has a side effect (0 lost), no id has two
 * (0 duplicates: the idempotency store's promise), a publish reported failed has at most one,
 * and nothing unknown was handled. `effects` maps a message id to one entry per side effect.
 */
export function checkDeliveries(
  published: Iterable<Published>,
  effects: ReadonlyMap<string, readonly unknown[]>,
): DeliveryCheck {
  const records = [...published]
  const ids = new Set(records.map((r) => r.id))
  const confirmed = records.filter((r) => r.confirmed)
  const failed = records.filter((r) => !r.confirmed)
  return {
    published: records.length,
    confirmed: confirmed.length,
    failed: failed.length,
    handled: effects.size,
    effects: [...effects.values()].reduce((sum, rows) => sum + rows.length, 0),
    lost: confirmed.filter((r) => !effects.has(r.id)).map((r) => r.id),
    duplicated: [...effects].filter(([, rows]) => rows.length > 1).map(([id]) => id),
    failedButHandled: failed.filter((r) => effects.has(r.id)).length,
    unknown: [...effects.keys()].filter((id) => !ids.has(id)),
  }
}

/** The check as accounting rows (see `printAccounting`). */
export function checkRows(check: DeliveryCheck): [string, number][] {
  return [
    ['published (ids)', check.published],
    ['confirmed', check.confirmed],
    ['reported failed', check.failed],
    ['handled (distinct ids)', check.handled],
    ['side effects (rows)', check.effects],
    ['lost (confirmed, never handled)', check.lost.length],
    ['duplicate side effects', check.effects - check.handled],
    ['reported failed, handled once', check.failedButHandled],
    ['effects for unknown ids', check.unknown.length],
  ]
}

/** Whether the run kept the library's promise. */
export function checkPassed(check: DeliveryCheck): boolean {
  return check.lost.length === 0 && check.duplicated.length === 0 && check.unknown.length === 0
}

/** The `q`-quantile (0..1) of `values` (nearest rank), or 0 for none. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return 0
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] as number
}
