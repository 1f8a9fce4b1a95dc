import type { Comparison } from './comparison.js'
import { ceiling } from './ceiling.js'
import { consume } from './consume.js'
import { idempotent } from './idempotent.js'
import { latency } from './latency.js'
import { ordered } from './ordered.js'
import { outbox } from './outbox.js'
import { publish } from './publish.js'
import { retry } from './retry.js'
import { rss } from './rss.js'
import { rpc } from './rpc.js'
import { cluster, scaleout } from './scaleout.js'

/** Every comparison, in the order they run. */
export const COMPARISONS: readonly Comparison[] = [
  consume,
  publish,
  idempotent,
  retry,
  ordered,
  outbox,
  rpc,
  ceiling,
  latency,
  scaleout,
  cluster,
  rss,
]
