import { type ReplayMessage } from '@acemq/core'
import { ORDERED_KEY_HEADER, headerString, readRoute } from '@acemq/core/spi'
import { humanDuration } from '../format.js'

/** One peeked message as `dlq peek` shows it (and prints it with `--json`). */
export interface PeekView {
  readonly id: string
  readonly type: string
  readonly attempt: number
  readonly firstSeen: number | undefined
  readonly ageMs: number | undefined
  readonly reason: string | undefined
  readonly replayCount: number
  /** How many times a quorum queue has had it back before (`x-delivery-count`). */
  readonly returns: number
  /** For a pipeline's message: the step it was at, and its route. */
  readonly step: string | undefined
  readonly route: readonly string[] | undefined
  /** For an ordered queue's message: its key, and the partition it came from. */
  readonly key: string | undefined
  readonly partition: number | undefined
  readonly contentType: string | undefined
  readonly headers: Readonly<Record<string, unknown>>
  readonly body: string
}

/** The ordered queue and partition a queue (or its `.dlq` / `.parked`) is, if its name says so. */
export function partitionOf(queue: string): { ordered: string; partition: number } | undefined {
  const source = queue.replace(/\.(dlq|parked)$/, '')
  const match = /^(.+)\.(\d+)$/.exec(source)
  if (match === null) return undefined
  return { ordered: match[1] as string, partition: Number(match[2]) }
}

/** What `dlq peek` shows of `message`, taken from `queue`, at `now`. */
export function peekView(message: ReplayMessage, queue: string, now: number): PeekView {
  const { envelope } = message
  const route = readRoute(message.wireHeaders)
  const key = headerString(message.headers[ORDERED_KEY_HEADER])
  const partition = partitionOf(queue)
  // An ordered queue's message carries its key and the ordered queue's name as its type.
  const ordered =
    partition !== undefined && (key !== undefined || envelope.type === partition.ordered)
  const step = route === undefined ? undefined : route.steps[route.position]
  return {
    id: envelope.id,
    type: envelope.type,
    attempt: envelope.attempt,
    firstSeen: envelope.firstSeen,
    ageMs: envelope.firstSeen === undefined ? undefined : Math.max(0, now - envelope.firstSeen),
    reason: envelope.error,
    replayCount: message.replayCount,
    returns: message.returns,
    step,
    route: route?.steps,
    key,
    partition: ordered ? partition.partition : undefined,
    contentType: message.contentType,
    headers: message.headers,
    body: Buffer.from(message.body).toString('utf8'),
  }
}

/** The lines of one peeked message, numbered from 1. */
export function peekLines(view: PeekView, index: number): string {
  const facts = [
    `${index + 1}. ${view.id}`,
    `attempt ${view.attempt}`,
    `age ${view.ageMs === undefined ? 'unknown' : humanDuration(view.ageMs)}`,
    `type ${view.type || '-'}`,
  ]
  if (view.replayCount > 0) facts.push(`replayed ${view.replayCount}x`)
  if (view.returns > 0) facts.push(`returned ${view.returns}x`)
  const lines = [facts.join('  ')]
  if (view.route !== undefined) {
    const at = view.route.indexOf(view.step ?? '')
    lines.push(
      `   step: ${view.step ?? '?'}${at >= 0 ? ` (${at + 1} of ${view.route.length})` : ''}  route: ${view.route.join(',')}`,
    )
  }
  if (view.partition !== undefined) {
    lines.push(`   partition: ${view.partition}  key: ${view.key ?? '(not carried)'}`)
  }
  lines.push(`   reason: ${view.reason ?? '(none)'}`)
  return lines.join('\n')
}
