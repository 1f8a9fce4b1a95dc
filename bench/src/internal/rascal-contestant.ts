import rascal from 'rascal'
import { AMQP_URL } from './config.js'
import { Countdown } from './contestants.js'

// rascal (and the lodash under it) takes a while to load: only its workers import this file.

export type RascalBroker = rascal.BrokerAsPromised

/**
 * A rascal broker on the queues given (declared beforehand, so rascal only uses them), one
 * subscription per queue (named after it, prefetch 100) and one confirmed publication per
 * queue (named `publish:<queue>`, rascal's defaults: confirm, persistent, mandatory).
 */
export async function openRascal(queues: readonly string[], prefetch = 100): Promise<RascalBroker> {
  const config = rascal.withDefaultConfig({
    vhosts: {
      '/': {
        connection: { url: AMQP_URL },
        queues: Object.fromEntries(queues.map((q) => [q, { assert: false, check: false }])),
      },
    },
    subscriptions: Object.fromEntries(queues.map((q) => [q, { vhost: '/', queue: q, prefetch }])),
    publications: Object.fromEntries(
      queues.map((q) => [`publish:${q}`, { vhost: '/', queue: q, confirm: true }]),
    ),
  })
  const broker = await rascal.BrokerAsPromised.create(config)
  broker.on('error', (error: unknown) => console.error('[bench] rascal broker error:', error))
  return broker
}

/** Drains `count` messages through a rascal subscription: rascal parses the JSON, the handler acks. */
export async function drainRascal(
  broker: RascalBroker,
  queue: string,
  count: number,
): Promise<number> {
  const countdown = new Countdown(count)
  const subscription = await broker.subscribe(queue)
  subscription.on('error', (error: unknown) =>
    console.error('[bench] rascal subscription error:', error),
  )
  subscription.on('message', (_message: unknown, _content: unknown, ackOrNack: () => void) => {
    ackOrNack()
    countdown.tick()
  })
  const ms = await countdown.done
  await subscription.cancel()
  return ms
}
