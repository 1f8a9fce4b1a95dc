import type { ConsumerHost } from '../consumer/consumer-host.js'
import type { ConsumerOptions } from '../consumer/consumer-options.js'
import type { Handler } from '../consumer/message.js'
import type { HealthContributor } from '../health/health.js'
import type { OrderedHost } from '../ordered/ordered-host.js'
import type { OutboxRelayHost } from '../outbox/outbox-relay.js'
import type { PipelineHost } from '../pipeline/pipeline-host.js'
import type { MessagingHost } from '../publisher/messaging-host.js'
import { Publisher, type PublisherHost } from '../publisher/publisher.js'
import type { ReplayHost } from '../replay/replay.js'
import { Scheduler } from '../scheduler/scheduler.js'
import type { ConnectionState } from './connection-state.js'

// The host adapters: what each part built on the engine sees of its connection. Each is a
// view, not a copy: pause flags, interceptors and instrumentation are read at use, not now.

/** The connection's scheduler (one per connection), made on first use. */
export function connectionScheduler(state: ConnectionState): Scheduler {
  state.assertOpen()
  state.scheduler ??= new Scheduler(messagingHost(state))
  return state.scheduler
}

export function publisherHost(state: ConnectionState): PublisherHost {
  return {
    transport: state.transport,
    codecs: state.codecs,
    origin: state.origin,
    get instrumentation() {
      return state.instrumentation
    },
    get publishingPaused() {
      return state.publishingPaused
    },
    get interceptors() {
      return state.interceptors
    },
    assertOpen: () => state.assertCanPublish(),
    reportError: (error, context) => state.reportError(error, context),
    schedule: (delay, exchange, routingKey, payload, options) =>
      connectionScheduler(state).in(delay, exchange, routingKey, payload, options),
  }
}

export function messagingHost(state: ConnectionState): MessagingHost {
  // The publisher's view underneath (not spread: its getters are read at use, not now).
  const host: MessagingHost = Object.create(publisherHost(state)) as MessagingHost
  return Object.assign(host, {
    consume: <T>(queue: string, options: ConsumerOptions, handler: Handler<T>) =>
      state.consume(queue, options, handler),
    registerHealth: (contributor: HealthContributor) => state.contributors.register(contributor),
    reportError: (error: unknown, context: string) => state.reportError(error, context),
  })
}

export function consumerHost(state: ConnectionState): ConsumerHost {
  return {
    transport: state.transport,
    codecs: state.codecs,
    origin: state.origin,
    currentTask: state.currentTask,
    closingSignal: state.closingController.signal,
    get instrumentation() {
      return state.instrumentation
    },
    get consumingPaused() {
      return state.consumingPaused
    },
    get interceptors() {
      return state.interceptors
    },
    inFlightChanged: (delta) => {
      state.inFlight += delta
      // Only a drain is ever waiting: skip the copy on every other message.
      if (delta < 0 && state.idleWaiters.size > 0) {
        for (const check of [...state.idleWaiters]) check()
      }
    },
    consumerClosed: (consumer) => {
      state.consumers.delete(consumer)
    },
    reportError: (error, context) => state.reportError(error, context),
    deadLettered: (report) => state.onDeadLetter(report),
    insideWaits: state.inside,
    enterInside: (task) => state.enterInside(task),
    leaveInside: (task) => state.leaveInside(task),
  }
}

/** `owner` is the connection ordered queues are registered under. */
export function orderedHost(state: ConnectionState, owner: object): OrderedHost {
  return {
    owner,
    transport: state.transport,
    publisher: (queue) => new Publisher(publisherHost(state), '', queue, {}),
    registerHealth: (contributor) => state.contributors.register(contributor),
    startConsumer: async (queue, options, handler, inPlace) => {
      state.assertOpen()
      return state.startEngine(queue, options, handler, inPlace)
    },
    assertOpen: () => state.assertOpen(),
    reportError: (error, context) => state.reportError(error, context),
  }
}

/** `owner` is the connection pipelines are registered under. */
export function pipelineHost(state: ConnectionState, owner: object): PipelineHost {
  return {
    owner,
    transport: state.transport,
    codecs: state.codecs,
    origin: state.origin,
    get instrumentation() {
      return state.instrumentation
    },
    publisher: (exchange, routingKey, reserved) =>
      new Publisher(publisherHost(state), exchange, routingKey, {}, reserved),
    registerHealth: (contributor) => state.contributors.register(contributor),
    startConsumer: async (queue, options, handler, step) => {
      state.assertOpen()
      return state.startEngine(queue, options, handler, step)
    },
    assertOpen: () => state.assertOpen(),
  }
}

export function outboxRelayHost(state: ConnectionState): OutboxRelayHost {
  return {
    transport: state.transport,
    origin: state.origin,
    get instrumentation() {
      return state.instrumentation
    },
    get publishingPaused() {
      return state.publishingPaused
    },
    get closed() {
      return state.closing !== undefined
    },
    registerHealth: (contributor) => state.contributors.register(contributor),
    reportError: (error, context) => state.reportError(error, context),
    relayStarted: (relay) => state.relays.add(relay),
    relayStopped: (relay) => state.relays.delete(relay),
  }
}

export function replayHost(state: ConnectionState): ReplayHost {
  return {
    transport: state.transport,
    codecs: state.codecs,
    assertOpen: () => state.assertOpen(),
  }
}
