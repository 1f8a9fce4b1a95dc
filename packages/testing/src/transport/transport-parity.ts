import { afterEach, beforeEach, describe } from 'vitest'
import type { Transport, TransportSubscription } from '@acemq/core/spi'
import { consumingParity } from './parity-consuming.js'
import { deadLetteringParity } from './parity-dead-lettering.js'
import { declarationsParity } from './parity-declarations.js'
import { parityKit, type ParityTarget } from './parity-kit.js'
import { routingParity } from './parity-routing.js'

export type { ParityTarget } from './parity-kit.js'

/**
 * Every RabbitMQ rule the in-memory transport says it shares with the broker, as assertions
 * that run unchanged on `InMemoryTransport` and on `AmqpTransport` against RabbitMQ: routing
 * on all four exchange types (headers `x-match` included) and to an alternate exchange, the
 * predeclared `amq.*` exchanges, mandatory returns, publishing to a missing exchange, queue
 * and per-message TTL with dead-lettering and `x-death`, dead-letter cycles, per-consumer
 * prefetch, where a requeued message goes back (classic and quorum), the redelivered flag,
 * `x-delivery-limit` on quorum queues, and which declarations the broker refuses. Every queue
 * and exchange name is fresh, so one broker (or virtual host) serves a whole run.
 */
export function transportParity(name: string, target: ParityTarget): void {
  describe(`RabbitMQ's rules on ${name}`, () => {
    let t: Transport
    let connected: Transport | undefined
    const open: TransportSubscription[] = []

    beforeEach(async () => {
      connected = undefined
      t = connected = await target.connect()
    })

    afterEach(async () => {
      for (const subscription of open.splice(0)) await subscription.close()
      // A failed connect has already said what went wrong; there is nothing to close.
      await connected?.close()
    })

    const kit = parityKit(target, () => t, open)
    routingParity(kit)
    deadLetteringParity(kit)
    consumingParity(kit)
    declarationsParity(kit)
  })
}
