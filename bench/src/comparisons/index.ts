import type { Comparison } from './comparison.js'
import { consume } from './consume.js'
import { idempotent } from './idempotent.js'
import { ordered } from './ordered.js'
import { outbox } from './outbox.js'
import { publish } from './publish.js'
import { retry } from './retry.js'
import { rpc } from './rpc.js'

/** Every comparison, in the order they run. */
export const COMPARISONS: readonly Comparison[] = [
  consume,
  publish,
  idempotent,
  retry,
  ordered,
  outbox,
  rpc,
]
