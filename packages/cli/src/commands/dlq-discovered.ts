import { describeBroker, type BrokerAbout } from '../broker.js'
import { EXIT_CODES } from '../exit-codes.js'
import { humanDuration, table } from '../format.js'
import {
  discoverDeadLetterQueues,
  managementEndpoint,
  type DiscoveredQueue,
} from '@acemq/transport-amqp'
import type { Output } from '../output.js'

/**
 * `dlq list` with no `--queues`: every `.dlq` and `.parked` queue of the URL's vhost, found
 * through the management API, with its depth, consumers and the age of its head message where
 * RabbitMQ reports one. AMQP cannot list queues, so without the API this fails and says how to
 * name them instead.
 */
export async function listDiscovered(
  options: { readonly url: string; readonly managementUrl?: string | undefined },
  output: Output,
  about: BrokerAbout,
): Promise<void> {
  const endpoint = managementEndpoint(options.url, options.managementUrl)
  const queues = await discoverDeadLetterQueues(endpoint, about.vhost)
  const lines = [`${describeBroker(about)}, management API ${endpoint.url}`]
  lines.push(
    queues.length === 0
      ? 'no dead-letter or parked queue on this virtual host'
      : table(
          ['QUEUE', 'TYPE', 'MESSAGES', 'CONSUMERS', 'OLDEST'],
          queues.map((q) => [
            q.queue,
            q.type,
            countOf(q.messages),
            countOf(q.consumers),
            q.oldestAgeMs === undefined ? '-' : humanDuration(q.oldestAgeMs),
          ]),
        ),
  )
  if (queues.some((q) => q.messages === undefined)) {
    lines.push('-: not yet reported by the broker (its statistics come every few seconds)')
  }
  output.result(lines.join('\n'), {
    ...about,
    management: endpoint.url,
    discovered: true,
    queues: queues.map(jsonOf),
  })
  // Nothing found is likely the wrong broker or virtual host, never "all empty".
  if (queues.length === 0) process.exitCode = EXIT_CODES.failed
}

function countOf(n: number | undefined): string {
  return n === undefined ? '-' : String(n)
}

function jsonOf(q: DiscoveredQueue): Record<string, unknown> {
  return {
    queue: q.queue,
    type: q.type,
    ...(q.messages === undefined ? {} : { messages: q.messages }),
    ...(q.consumers === undefined ? {} : { consumers: q.consumers }),
    ...(q.oldestAgeMs === undefined ? {} : { oldestAgeMs: q.oldestAgeMs }),
  }
}
