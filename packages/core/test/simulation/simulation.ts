import { getEventListeners } from 'node:events'
import {
  Ack,
  AceMq,
  ConsumerOptions,
  FatalError,
  InMemoryTransport,
  RetryPolicy,
  Topology,
  type Consumer,
  type Headers,
  type Handler,
  type HandlerContext,
  type Message,
} from '../../src/index.js'
import { HANDLER_ABANDON_TIMEOUT, rungQueueName } from '../../src/spi.js'
import { FaultStore, type ClaimRecord } from './fault-store.js'
import {
  FaultTransport,
  idOf,
  type PublishRecord,
  type QueueFaultSettings,
  type SimDelivery,
} from './fault-transport.js'
import { type Behaviour, type Event, type QueueConfig, type Schedule } from './schedule.js'
import { VirtualClock } from './virtual-clock.js'

/** What a schedule came to. */
export interface Verdict {
  readonly violations: string[]
  readonly runs: number
  readonly steps: number
  /** What the regression schedules look at more closely. */
  readonly world: World | undefined
}

/** The transport and the messages' stories, after the run. */
export interface World {
  readonly drains: DrainRecord[]
  readonly transport: FaultTransport
  readonly messages: ReadonlyMap<string, MessageRecord>
  readonly errors: readonly string[]
}

/** How long the system gets, once the faults heal, to finish everything it can. */
const HEAL_HORIZON_MS = 2 * 3_600_000
/** Timers a schedule may fire before it counts as never settling. */
const MAX_STEPS = 20_000
/**
 * Timers the system may fire between the faults healing and quiescence. More than the phases
 * around it: a claim its owner still holds (a handler given up on by a close keeps working, a
 * release that hung) keeps its message going round as in progress until the lease runs out,
 * every `inProgressDelay` — 3,000 put-backs for a 300 s lease at 100 ms, each a few timers.
 */
const HEAL_MAX_STEPS = 200_000
/** The headers a foreign AceMQ library writes that this one does not know. */
export const FOREIGN_HEADERS: Headers = Object.freeze({
  'x-acemq-route': 'sim.q0,next.step',
  'x-acemq-route-position': { '!': 'int', value: 0 },
  'x-acemq-route-id': 'run-7',
  'x-app-count': { '!': 'long', value: 5 },
})

export interface RunRecord {
  readonly serial: number
  readonly id: string
  readonly consumer: number
  readonly delivery: SimDelivery | undefined
  readonly behaviour: Behaviour
  readonly startedAt: number
  readonly attempt: number
  readonly claim: ClaimRecord | undefined
  endedAt: number | undefined
  succeeded: boolean
  /** It called close() from inside: its own settlement gets a bounded time after the answer. */
  abandonAt: number | undefined
}

export interface MessageRecord {
  readonly id: string
  /** The queue it was published to. */
  readonly queue: string
  readonly queueIndex: number | undefined
  readonly script: readonly Behaviour[]
  readonly foreign: boolean
  publish: PublishRecord | undefined
  readonly runs: RunRecord[]
}

/** One drainConsumers() call and its answer. */
export interface DrainRecord {
  readonly inside: string | undefined
  readonly timeoutMs: number
  readonly began: number
  ended: number | undefined
  result: boolean | 'rejected' | undefined
}

interface CloseRecord {
  readonly at: number
  readonly drainMs: number
  /** A consumer's close, or the connection's (undefined). */
  readonly consumer: number | undefined
}

interface Pending {
  readonly what: string
  settled: boolean
}

let unhandled: unknown[] = []
process.on('unhandledRejection', (reason) => {
  unhandled.push(reason)
})

const queueName = (index: number): string => `sim.q${index}`

function policyOf(config: QueueConfig): RetryPolicy | undefined {
  const retry = config.retry
  switch (retry.kind) {
    case 'none':
      return undefined
    case 'fixed':
      return RetryPolicy.fixed(retry.attempts, retry.delayMs)
    case 'exponential':
      return RetryPolicy.exponential(retry.attempts, retry.delayMs, 10_000)
    case 'broker':
      return RetryPolicy.fixed(retry.attempts, retry.delayMs).waitInBrokerFrom(1)
  }
}

/**
 * Runs one schedule on a virtual clock and judges what it left behind. Deterministic: the same
 * schedule gives the same verdict.
 */
export async function runSchedule(schedule: Schedule): Promise<Verdict> {
  const clock = VirtualClock.install(schedule.seed)
  unhandled = []
  const violations: string[] = []
  const fail = (text: string): void => {
    violations.push(`[${clock.now} ms] ${text}`)
  }
  let runSerial = 0
  let world: World | undefined
  const errors: string[] = []
  try {
    const settings = new Map<string, QueueFaultSettings>()
    schedule.queues.forEach((config, index) => {
      settings.set(queueName(index), {
        ...(config.consumerTimeoutMs === undefined
          ? {}
          : { consumerTimeoutMs: config.consumerTimeoutMs }),
        ...(config.type === 'quorum' && config.deliveryLimit !== undefined
          ? { deliveryLimit: config.deliveryLimit }
          : {}),
      })
    })
    const transport = new FaultTransport(new InMemoryTransport(), clock, settings)
    const mq = await AceMq.connect(transport, {
      origin: 'sim',
      onError: (error, context) => errors.push(`[${clock.now} ms] ${context}: ${String(error)}`),
    })
    const policies = schedule.queues.map(policyOf)
    const stores = schedule.queues.map((config) =>
      config.idempotent ? new FaultStore(clock, config.claimTimeoutMs) : undefined,
    )
    let topology = Topology.define().queue('sim.sink', { type: 'classic' })
    schedule.queues.forEach((config, index) => {
      const policy = policies[index]
      const options = {
        type: config.type,
        ...(config.type === 'quorum' && config.deliveryLimit !== undefined
          ? { arguments: { 'x-delivery-limit': config.deliveryLimit } }
          : {}),
      }
      topology =
        policy === undefined
          ? topology.queueWithDeadLetter(queueName(index), options)
          : topology.queueWithRetry(queueName(index), policy, options)
    })
    await mq.applyTopology(topology)

    const messages = new Map<string, MessageRecord>()
    const drains: DrainRecord[] = []
    world = { transport, messages, errors, drains }
    const drained = (
      inside: string | undefined,
      timeoutMs: number,
      promise: Promise<boolean>,
    ): Promise<boolean> => {
      const record: DrainRecord = {
        inside,
        timeoutMs,
        began: clock.now,
        ended: undefined,
        result: undefined,
      }
      drains.push(record)
      promise.then(
        (result) => {
          record.ended = clock.now
          record.result = result
        },
        () => {
          record.ended = clock.now
          record.result = 'rejected'
        },
      )
      return promise
    }
    const closes: CloseRecord[] = []
    const pending: Pending[] = []
    const consumers: Consumer[] = []
    const consumerQueue: number[] = []
    const running: number[] = []
    const signals = new Set<AbortSignal>()

    const track = <T>(what: string, promise: Promise<T>): Promise<T> => {
      const entry: Pending = { what, settled: false }
      pending.push(entry)
      const settled = (): void => {
        entry.settled = true
      }
      promise.then(settled, settled)
      return promise
    }

    /** The first moment a close applying to `consumer` aborts its handlers. */
    const abortsAt = (consumer: number): number => {
      let first = Infinity
      for (const close of closes) {
        if (close.consumer !== undefined && close.consumer !== consumer) continue
        first = Math.min(first, close.at + close.drainMs)
      }
      return first
    }

    /** A run whose handler or settlement outlived a close's drain: its outcome may be dropped. */
    const possiblyAbandoned = (run: RunRecord): boolean => {
      const abort = Math.min(abortsAt(run.consumer), run.abandonAt ?? Infinity)
      const finishedAt = run.delivery?.written?.at ?? run.delivery?.death?.at ?? Infinity
      return (run.endedAt ?? Infinity) >= abort || finishedAt >= abort
    }

    const publishMessage = (
      record: MessageRecord,
      exchange: string,
      routingKey: string,
      payload: unknown,
    ): Promise<void> => {
      const before = transport.publishes.length
      transport.harnessPublishing = true
      let sent: Promise<void>
      try {
        if (record.foreign) {
          sent = transport.publish({
            exchange,
            routingKey,
            body: Buffer.from(JSON.stringify(payload)),
            headers: {
              ...FOREIGN_HEADERS,
              'x-acemq-id': record.id,
              'x-acemq-attempt': { '!': 'int', value: 1 },
            },
            properties: { contentType: 'application/json', messageId: record.id },
            persistent: true,
            mandatory: true,
          })
        } else {
          sent = mq.publisher(exchange, routingKey).send(payload, { id: record.id })
        }
      } finally {
        transport.harnessPublishing = false
      }
      if (transport.publishes.length > before) record.publish = transport.publishes[before]
      return sent
    }

    const messageOf = (
      id: string,
      queue: string,
      queueIndex: number | undefined,
      script: readonly Behaviour[],
      foreign: boolean,
    ): MessageRecord => {
      const record: MessageRecord = {
        id,
        queue,
        queueIndex,
        script,
        foreign,
        publish: undefined,
        runs: [],
      }
      messages.set(id, record)
      return record
    }

    const handlerFor =
      (consumerIndex: number, queueIndex: number) =>
      async (message: Message<unknown>, context: HandlerContext): Promise<unknown> => {
        const id = message.envelope.id
        const record = messages.get(id)
        const delivery = transport.deliveryOf(message.body)
        const config = schedule.queues[queueIndex] as QueueConfig
        signals.add(context.signal)
        if (record === undefined) {
          fail(`a handler ran for ${id}, which nobody published`)
          return undefined
        }
        if (delivery === undefined)
          fail(`a handler ran for ${id} on a delivery the transport never made`)
        else if (!delivery.settleable) {
          fail(
            `a handler started for ${id} on delivery #${delivery.serial} whose channel had gone (${delivery.death?.cause ?? 'settled'} at ${delivery.death?.at ?? delivery.written?.at} ms)`,
          )
        }
        if (delivery !== undefined && record.runs.some((r) => r.delivery === delivery)) {
          fail(`delivery #${delivery.serial} of ${id} ran its handler twice`)
        }
        let claim: ClaimRecord | undefined
        const store = stores[queueIndex]
        if (store !== undefined) {
          // The engine runs the handler as soon as its claim is answered: the latest one is its.
          claim = [...store.claims]
            .reverse()
            .find(
              (c) =>
                c.id === id &&
                c.usedBy === undefined &&
                c.releasedAt === undefined &&
                c.answeredAt !== undefined,
            )
          if (claim === undefined) fail(`a handler ran for ${id} without a claim granted for it`)
          else claim.usedBy = runSerial + 1
        }
        const policy = policies[queueIndex]
        if (policy !== undefined && message.envelope.attempt > policy.maxAttempts) {
          fail(
            `${id} ran attempt ${message.envelope.attempt} under a policy of ${policy.maxAttempts}`,
          )
        }
        const behaviour = record.script[
          Math.min(record.runs.length, record.script.length - 1)
        ] as Behaviour
        const run: RunRecord = {
          serial: ++runSerial,
          id,
          consumer: consumerIndex,
          delivery,
          behaviour,
          startedAt: clock.now,
          attempt: message.envelope.attempt,
          claim,
          endedAt: undefined,
          succeeded: false,
          abandonAt: undefined,
        }
        if (process.env['ACEMQ_SIM_TRACE'])
          console.log(
            `[${clock.now}] run ${run.serial} ${id} ${behaviour.kind} on #${delivery?.serial}`,
          )
        judgeRerun(record, run, store !== undefined)
        record.runs.push(run)
        running[consumerIndex] = (running[consumerIndex] ?? 0) + 1
        const limit =
          config.consumers[consumerIndex - firstConsumerOf(queueIndex)]?.concurrency ?? 1
        if ((running[consumerIndex] as number) > limit) {
          fail(
            `consumer ${consumerIndex} ran ${running[consumerIndex]} handlers at once, over its concurrency ${limit}`,
          )
        }
        const succeed = <R>(value: R): R => {
          run.succeeded = true
          return value
        }
        try {
          return await perform(behaviour, run, record, context, consumerIndex, succeed)
        } finally {
          if (process.env['ACEMQ_SIM_TRACE'])
            console.log(`[${clock.now}] run ${run.serial} ended, succeeded ${run.succeeded}`)
          run.endedAt = clock.now
          running[consumerIndex] = (running[consumerIndex] as number) - 1
        }
      }

    const firstConsumerOf = (queueIndex: number): number => consumerQueue.indexOf(queueIndex)

    /** A handler ran again after a success: only a fault that allows it may explain that. */
    const judgeRerun = (record: MessageRecord, run: RunRecord, idempotent: boolean): void => {
      for (const earlier of record.runs) {
        if (!earlier.succeeded) continue
        if (idempotent) {
          const confirmedAt = earlier.claim?.confirmedAt
          const confirmedSeq = earlier.claim?.confirmedSeq
          // By the store's order, not the clock: a grant and a confirm can share a millisecond.
          if (
            confirmedSeq !== undefined &&
            run.claim !== undefined &&
            confirmedSeq < run.claim.grantedSeq
          ) {
            fail(
              `${record.id} ran again (run ${run.serial}) under a claim granted at ${run.claim.grantedAt} ms, after run ${earlier.serial} succeeded and was confirmed at ${confirmedAt} ms`,
            )
          }
        } else {
          const acked = earlier.delivery?.written?.kind === 'ack'
          if (acked && extras(record) === 0) {
            fail(
              `${record.id} ran again (run ${run.serial}) after run ${earlier.serial} succeeded and its ack was written, with no second copy of it anywhere`,
            )
          }
        }
      }
    }

    const perform = async (
      behaviour: Behaviour,
      run: RunRecord,
      record: MessageRecord,
      context: HandlerContext,
      consumerIndex: number,
      succeed: <R>(value: R) => R,
    ): Promise<unknown> => {
      switch (behaviour.kind) {
        case 'ok':
          return succeed(undefined)
        case 'accept':
          return succeed(Ack.accept())
        case 'throw':
          throw new Error('simulated failure')
        case 'fatal':
          throw new FatalError('simulated fatal failure')
        case 'retry':
          return Ack.retry('simulated retry', behaviour.delayMs)
        case 'park':
          return Ack.park('simulated park')
        case 'dead-letter':
          return Ack.deadLetter('simulated dead letter')
        case 'release':
          return Ack.release()
        case 'slow': {
          if (!(await clock.sleep(behaviour.ms, context.signal))) {
            const allowed = abortsAt(consumerIndex)
            if (clock.now < allowed)
              fail(
                `run ${run.serial} of ${record.id}: its signal aborted at ${clock.now} ms, before any close's drain ended`,
              )
            throw new Error('simulated: aborted')
          }
          return succeed(undefined)
        }
        case 'stubborn':
          await clock.sleep(behaviour.ms)
          return succeed(undefined)
        case 'fail-after':
          await clock.sleep(behaviour.ms)
          throw new Error('simulated failure after a while')
        case 'odd':
          return succeed({ kind: behaviour.value, reason: 'a column called kind' })
        case 'publish': {
          if (behaviour.afterMs > 0) await clock.sleep(behaviour.afterMs)
          const childId = `${record.id}>${run.serial}`
          const to = behaviour.to
          const [exchange, routingKey, queueIndex] =
            to === 'missing-exchange'
              ? ['sim.missing', 'nowhere', undefined]
              : to === 'sink'
                ? ['', 'sim.sink', undefined]
                : ['', queueName(to % schedule.queues.length), to % schedule.queues.length]
          const child = messageOf(childId, routingKey, queueIndex, [{ kind: 'ok' }], false)
          const startedAt = clock.now
          await track(
            `${record.id} publishing ${childId}`,
            publishMessage(child, exchange, routingKey, { child: true }),
          ).catch((error: unknown) => {
            const closedAt = closes
              .filter((c) => c.consumer === undefined)
              .map((c) => c.at + c.drainMs + HANDLER_ABANDON_TIMEOUT)
            const refusedEarly =
              (error as { code?: string }).code === 'ACEMQ_CLOSED' &&
              closedAt.every((end) => startedAt < end)
            if (refusedEarly)
              fail(
                `run ${run.serial} of ${record.id} was refused its publish of ${childId} as closed while the close still drained it`,
              )
          })
          return succeed(undefined)
        }
        case 'drain': {
          if (behaviour.afterMs !== undefined) await clock.sleep(behaviour.afterMs)
          const began = clock.now
          const result = await track(
            `drain from ${record.id}`,
            drained(record.id, behaviour.timeoutMs, mq.drainConsumers(behaviour.timeoutMs)),
          )
          // A drain still waiting when the connection's close is done answers false then.
          if (!result && clock.now - began < behaviour.timeoutMs && !mq.closed) {
            fail(
              `a drain from inside ${record.id} answered false after ${clock.now - began} ms, before its ${behaviour.timeoutMs} ms`,
            )
          }
          return succeed(undefined)
        }
        case 'close':
          if (behaviour.afterMs !== undefined) await clock.sleep(behaviour.afterMs)
          closes.push({ at: clock.now, drainMs: behaviour.drainMs, consumer: undefined })
          await track(`close from ${record.id}`, mq.close({ drainTimeout: behaviour.drainMs }))
          // Answered once the others drained; its own settlement then has a bounded time.
          run.abandonAt = clock.now + HANDLER_ABANDON_TIMEOUT
          return succeed(undefined)
        case 'close-consumer':
          if (behaviour.afterMs !== undefined) await clock.sleep(behaviour.afterMs)
          closes.push({ at: clock.now, drainMs: behaviour.drainMs, consumer: consumerIndex })
          await track(
            `consumer close from ${record.id}`,
            (consumers[consumerIndex] as Consumer).close({ drainTimeout: behaviour.drainMs }),
          )
          return succeed(undefined)
      }
    }

    // Consumers.
    for (const [queueIndex, config] of schedule.queues.entries()) {
      for (const settings of config.consumers) {
        let options = ConsumerOptions.defaults()
          .withPrefetch(settings.prefetch)
          .withConcurrency(settings.concurrency)
          .withInProgressDelay(config.inProgressDelayMs)
          .withHeldTimeout(config.heldTimeoutMs)
          .withStoreTimeout(config.storeTimeoutMs)
        const policy = policies[queueIndex]
        if (policy !== undefined) options = options.withRetry(policy)
        else if (config.retry.kind === 'none')
          options = options.withRetryDelay(config.retry.delayMs)
        const store = stores[queueIndex]
        if (store !== undefined) options = options.idempotent(store)
        const index = consumers.length
        consumerQueue.push(queueIndex)
        consumers.push(
          await mq.consume(
            queueName(queueIndex),
            options,
            handlerFor(index, queueIndex) as Handler<unknown>,
          ),
        )
      }
    }

    // Messages and events, each on a harness timer.
    let publishedCount = 0
    let published = schedule.messages.length === 0
    schedule.messages.forEach((plan, index) => {
      const queue = queueName(plan.queue % schedule.queues.length)
      const record = messageOf(
        `m${index}`,
        queue,
        plan.queue % schedule.queues.length,
        plan.script,
        plan.foreign,
      )
      clock.setTimeout(() => {
        published = ++publishedCount === schedule.messages.length
        void track(
          `publish of ${record.id}`,
          publishMessage(record, '', queue, { n: index }),
        ).catch(() => undefined)
      }, plan.at)
    })
    let fired = 0
    for (const { at, event } of schedule.events) {
      clock.setTimeout(() => {
        fired++
        apply(event)
      }, at)
    }

    /**
     * Every resume the harness makes: a drain's answer is judged only when none came between its
     * start and its answer (a resume starts more handlers, and a drain called from one of them
     * pauses consuming again before the answer is seen; simulation finding 16).
     */
    let resumes = 0
    const resumeConsuming = (): void => {
      resumes++
      mq.resumeConsuming()
    }

    const apply = (event: Event): void => {
      if (process.env['ACEMQ_SIM_TRACE'])
        console.log(`[${clock.now}] event ${JSON.stringify(event)}`)
      const q = (index: number): string => queueName(index % schedule.queues.length)
      switch (event.kind) {
        case 'pause':
          mq.pauseConsuming()
          return
        case 'resume':
          resumeConsuming()
          return
        case 'drain': {
          const controller = event.abortAfterMs === undefined ? undefined : new AbortController()
          if (controller !== undefined)
            clock.setTimeout(() => controller.abort(), event.abortAfterMs as number)
          const began = clock.now
          const resumesBefore = resumes
          void track(
            'drain',
            drained(
              undefined,
              event.timeoutMs,
              mq.drainConsumers(event.timeoutMs, controller?.signal),
            ),
          ).then(
            (result) => {
              // A drain still waiting when the connection's close is done answers false then.
              if (!result && clock.now - began < event.timeoutMs && !mq.closed) {
                fail(
                  `a drain answered false after ${clock.now - began} ms, before its ${event.timeoutMs} ms`,
                )
              }
              // Handlers a close gave up on still count in inFlight until they return, but no
              // drain waits for them (sim-findings.md, finding 3).
              const abandoned = [...messages.values()]
                .flatMap((m) => m.runs)
                .filter((r) => r.endedAt === undefined && possiblyAbandoned(r)).length
              if (process.env['ACEMQ_SIM_TRACE'])
                console.log(`[${clock.now}] drain answered ${result}, inFlight ${mq.inFlight}`)
              // Only while consuming stayed paused: a resume since may have started more (and
              // a drain from one of them paused it again: finding 16). A close that began since
              // may have woken a wait into a running task already.
              const stayedPaused = mq.consumingPaused && resumes === resumesBefore
              if (result && stayedPaused && closes.length === 0 && mq.inFlight > abandoned) {
                fail(
                  `a drain answered true with ${mq.inFlight} handlers in flight (${abandoned} of them given up on)`,
                )
              }
              if (
                controller !== undefined &&
                getEventListeners(controller.signal, 'abort').length > 0
              ) {
                fail('a drain left its listener on the signal it was given')
              }
            },
            (error: unknown) => {
              if (!(
                controller?.signal.aborted === true && (error as Error).name === 'AbortError'
              )) {
                fail(`a drain rejected: ${String(error)}`)
              }
            },
          )
          return
        }
        case 'close':
          closes.push({ at: clock.now, drainMs: event.drainMs, consumer: undefined })
          void track('close', mq.close({ drainTimeout: event.drainMs })).catch((error: unknown) =>
            fail(`close rejected: ${String(error)}`),
          )
          return
        case 'close-consumer': {
          const index = event.consumer % consumers.length
          closes.push({ at: clock.now, drainMs: event.drainMs, consumer: index })
          void track(
            'consumer close',
            (consumers[index] as Consumer).close({ drainTimeout: event.drainMs }),
          ).catch((error: unknown) => fail(`consumer close rejected: ${String(error)}`))
          return
        }
        case 'connection-loss':
          transport.dropConnection(event.which, event.outageMs)
          return
        case 'channel-close':
          transport.closeChannel(q(event.queue))
          return
        case 'nack':
          transport.nack(event.count, event.lane)
          return
        case 'unroutable': {
          const index = event.queue % schedule.queues.length
          const config = schedule.queues[index] as QueueConfig
          const source = q(index)
          const target =
            event.target === 'source'
              ? source
              : event.target === 'parked'
                ? `${source}.parked`
                : event.target === 'rung' && config.retry.kind === 'broker'
                  ? rungQueueName(source, config.retry.delayMs)
                  : `${source}.dlq`
          transport.unroutable(target, event.forMs)
          return
        }
        case 'late-confirm':
          transport.lateConfirms(event.count, event.delayMs)
          return
        case 'store-fault':
          for (const store of stores)
            store?.inject(event.op, event.fault, event.count, event.delayMs)
          return
        case 'clock-jump':
          clock.jump(event.ms)
          return
        case 'missing-exchange-publish': {
          transport.harnessPublishing = true
          try {
            void mq
              .publisher('sim.missing', 'nowhere')
              .send({})
              .catch(() => undefined)
          } finally {
            transport.harnessPublishing = false
          }
          return
        }
      }
    }

    /**
     * Instances of a message beyond the first: a copy the engine enqueued while its original
     * stayed (its channel went, its close gave up, or the copy's confirm failed and it was sent
     * again). Whether each was allowed is judged apart: a confirmed copy's original must be
     * acked unless a fault or an abandoned close explains it.
     */
    const extras = (record: MessageRecord): number => {
      let extra = 0
      for (const delivery of transport.deliveries) {
        if (delivery.id !== record.id) continue
        const copies = delivery.copies.filter((c) => c.enqueued).length
        extra += Math.max(0, copies - (delivery.written?.kind === 'ack' ? 1 : 0))
      }
      return extra
    }

    // Phase 1: the schedule.
    // Until every event has fired (a clock jump moves the timers with it, so not by the time).
    const scheduled = await clock.run(
      () => fired === schedule.events.length && published,
      Infinity,
      MAX_STEPS,
    )
    if (scheduled === 'steps')
      fail(`${MAX_STEPS} timers fired before the schedule's last event (${clock.describeTimers()})`)

    // Phase 2: the faults heal; everything the system can finish, it finishes.
    transport.heal()
    for (const store of stores) store?.heal()
    if (process.env['ACEMQ_SIM_TRACE']) console.log(`[${clock.now}] heal`)
    if (!mq.closed) resumeConsuming()
    const horizon = clock.now + HEAL_HORIZON_MS
    let healed = await clock.run(() => false, horizon, HEAL_MAX_STEPS)
    // A drain from a handler pauses consuming again: resume until nothing pauses it.
    for (let i = 0; i < 5 && healed === 'idle' && !mq.closed && mq.consumingPaused; i++) {
      resumeConsuming()
      healed = await clock.run(() => false, horizon, HEAL_MAX_STEPS)
    }
    const timedOut = transport.subscriptions.some((s) => s.consumerTimeouts > 0)
    if (healed === 'steps')
      fail(
        `it never settled: ${HEAL_MAX_STEPS} timers fired after the faults healed (${clock.describeTimers()})`,
      )
    // A wait longer than the horizon (a retry delay of days) leaves the clock early: quiet, not
    // spinning. Timers that keep firing until the horizon are a livelock, unless the broker's
    // consumer timeout keeps closing the channel under a handler slower than it.
    const spun = healed === 'horizon' && clock.now > horizon - HEAL_HORIZON_MS / 2
    if (spun && !timedOut)
      fail(
        `it never settled within ${HEAL_HORIZON_MS} ms of the faults healing (${clock.describeTimers()})`,
      )
    if (healed === 'idle' && !mq.closed) {
      // Liveness: a queue someone still consumes is empty, and nothing waits.
      for (const [index] of schedule.queues.entries()) {
        const open = consumers.some(
          (_, c) => consumerQueue[c] === index && !closes.some((close) => close.consumer === c),
        )
        if (!open) continue
        for (const name of queuesOf(schedule, index).filter(
          (n) => !n.endsWith('.dlq') && !n.endsWith('.parked'),
        )) {
          const left = transport.inner
            .peek(name)
            .map((m) => idOf(m.headers, m.properties.messageId))
          if (left.length > 0)
            fail(
              `${left.join(', ')} still on '${name}' once the faults healed and the consumers were idle`,
            )
        }
      }
      if (mq.inFlight !== 0 || mq.waiting !== 0 || mq.held !== 0) {
        fail(
          `idle after healing yet inFlight ${mq.inFlight}, waiting ${mq.waiting}, held ${mq.held}`,
        )
      }
    }

    // Phase 3: close, and let every timer of the harness (handlers still sleeping) run out.
    if (!mq.closed) {
      closes.push({ at: clock.now, drainMs: schedule.finalDrainMs, consumer: undefined })
      void track('final close', mq.close({ drainTimeout: schedule.finalDrainMs })).catch(
        (error: unknown) => fail(`close rejected: ${String(error)}`),
      )
    }
    await clock.run(
      () => pending.every((p) => p.settled) && clock.harnessTimers === 0,
      clock.now + HEAL_HORIZON_MS,
      MAX_STEPS,
    )
    const unsettled = pending.filter((p) => !p.settled).map((p) => p.what)
    if (unsettled.length > 0) fail(`never settled: ${unsettled.join(', ')}`)
    // Bounded one-shot timers may outlive the close: a store call's timeout (the call hung), and
    // the in-memory broker's own message expiry on rung queues (sim-findings.md, finding 2).
    const grace = Math.max(
      0,
      ...schedule.queues.map((c) =>
        Math.max(c.storeTimeoutMs, c.retry.kind === 'broker' ? c.retry.delayMs : 0),
      ),
    )
    await clock.run(() => false, clock.now + grace + 1, MAX_STEPS)
    await clock.settle()
    if (clock.timers - clock.harnessTimers > 0)
      fail(`timers left after close: ${clock.describeTimers()}`)
    if (transport.listenerCount !== 0)
      fail(`${transport.listenerCount} transport listener(s) left after close`)
    for (const signal of signals) {
      const left = getEventListeners(signal, 'abort').length
      if (left > 0) fail(`${left} listener(s) left on a handler's signal after close`)
    }
    if (mq.inFlight !== 0 || mq.held !== 0 || mq.waiting !== 0) {
      fail(`after close: inFlight ${mq.inFlight}, held ${mq.held}, waiting ${mq.waiting}`)
    }
    for (const [index, consumer] of consumers.entries()) {
      if (consumer.inFlight !== 0 || consumer.held !== 0 || consumer.waiting !== 0) {
        fail(
          `after close, consumer ${index}: inFlight ${consumer.inFlight}, held ${consumer.held}, waiting ${consumer.waiting}`,
        )
      }
    }

    // Every message: where it ended up.
    judgeMessages(schedule, transport, stores, messages, extras, possiblyAbandoned, fail)
    for (const text of transport.violations) fail(text)
    for (const store of stores) for (const text of store?.violations ?? []) fail(text)
    return { violations, runs: runSerial, steps: clock.steps, world }
  } catch (error) {
    fail(
      `the harness threw: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
    )
    return { violations, runs: runSerial, steps: clock.steps, world }
  } finally {
    clock.uninstall()
    await new Promise((resolve) => setImmediate(resolve))
    await new Promise((resolve) => setImmediate(resolve))
    for (const reason of unhandled) {
      violations.push(
        `unhandled rejection: ${reason instanceof Error ? (reason.stack ?? reason.message) : String(reason)}`,
      )
    }
  }
}

/** Every queue a message of source queue `index` can sit on. */
function queuesOf(schedule: Schedule, index: number): string[] {
  const config = schedule.queues[index] as QueueConfig
  const source = queueName(index)
  const names = [source, `${source}.dlq`, `${source}.parked`]
  if (config.retry.kind === 'broker') names.push(rungQueueName(source, config.retry.delayMs))
  return names
}

function judgeMessages(
  schedule: Schedule,
  transport: FaultTransport,
  stores: readonly (FaultStore | undefined)[],
  messages: ReadonlyMap<string, MessageRecord>,
  extras: (record: MessageRecord) => number,
  possiblyAbandoned: (run: RunRecord) => boolean,
  fail: (text: string) => void,
): void {
  const names = ['sim.sink', ...schedule.queues.flatMap((_, index) => queuesOf(schedule, index))]
  const where = new Map<string, { queue: string; headers: Headers }[]>()
  for (const name of names) {
    for (const stored of transport.inner.peek(name)) {
      const id = idOf(stored.headers, stored.properties.messageId) ?? '?'
      const list = where.get(id) ?? []
      list.push({ queue: name, headers: stored.headers })
      where.set(id, list)
    }
  }
  for (const id of where.keys())
    if (!messages.has(id)) fail(`'${id}' is on a queue and nobody published it`)

  for (const record of messages.values()) {
    const copies = where.get(record.id) ?? []
    const deliveries = transport.deliveries.filter((d) => d.id === record.id)
    const store = record.queueIndex === undefined ? undefined : stores[record.queueIndex]

    // Conservation: what the transport holds is what was put in less what was acked.
    const created =
      (record.publish?.enqueued ? 1 : 0) +
      deliveries.reduce((n, d) => n + d.copies.filter((c) => c.enqueued).length, 0)
    const removed = deliveries.filter((d) => d.written?.kind === 'ack').length
    if (copies.length !== created - removed) {
      fail(
        `${record.id}: ${copies.length} on queues, but ${created} were enqueued and ${removed} acked`,
      )
    }

    // One copy per move: none sent again once one was confirmed.
    for (const delivery of deliveries) {
      const confirmed = delivery.copies.findIndex((c) => c.outcome === 'confirmed')
      if (confirmed >= 0 && confirmed < delivery.copies.length - 1) {
        fail(
          `${record.id}: delivery #${delivery.serial} was copied again after its copy to '${delivery.copies[confirmed]?.routingKey}' was confirmed`,
        )
      }
    }

    // Each settlement the transport wrote, once.
    for (const delivery of deliveries) {
      if (delivery.extraSettlements > 0) {
        fail(
          `${record.id}: delivery #${delivery.serial} was settled again after its ${delivery.written?.kind} was written`,
        )
      }
    }

    const successes = record.runs.filter((r) => r.succeeded)
    const ackedAfterSuccess = deliveries.some((d) => {
      if (d.written?.kind !== 'ack') return false
      const runs = record.runs.filter((r) => r.delivery === d)
      if (runs.some((r) => r.succeeded)) return true
      if (d.copies.some((c) => c.outcome === 'confirmed')) return false
      if (runs.length > 0) {
        fail(
          `${record.id}: delivery #${d.serial} was acked though its handler did not succeed and no copy was made`,
        )
        return false
      }
      // Acked without running: a duplicate, which needs an earlier success.
      if (successes.length === 0 && store?.confirmed.has(record.id) !== true) {
        fail(
          `${record.id}: delivery #${d.serial} was acked without running, and it never succeeded anywhere`,
        )
      }
      return true
    })

    // Exactly one place: acked after success, .dlq, .parked or still queued.
    const total = copies.length + (ackedAfterSuccess ? 1 : 0)
    const base = record.publish?.enqueued ? 1 : 0
    const allowed = base + extras(record)
    if (record.publish?.outcome === 'confirmed' && total === 0) {
      fail(
        `${record.id} was confirmed and then lost: not acked after a success, not on any queue (runs: ${describeRuns(record)})`,
      )
    }
    if (total > allowed) {
      fail(
        `${record.id} is in ${total} places (${copies.map((c) => c.queue).join(', ')}${ackedAfterSuccess ? ', acked' : ''}); faults explain ${allowed}`,
      )
    }

    // Set aside only for a reason the handler (or the broker) gave.
    for (const copy of copies) {
      if (copy.queue.endsWith('.dlq')) {
        const dead = record.runs.some(
          (r) => r.behaviour.kind === 'fatal' || r.behaviour.kind === 'dead-letter',
        )
        const gaveUp =
          record.queueIndex !== undefined &&
          (schedule.queues[record.queueIndex] as QueueConfig).retry.kind !== 'none' &&
          record.runs.some((r) => !r.succeeded)
        const byBroker = copy.headers['x-first-death-reason'] !== undefined
        if (!dead && !gaveUp && !byBroker)
          fail(
            `${record.id} is on '${copy.queue}' though nothing dead-lettered it (runs: ${describeRuns(record)})`,
          )
      }
      if (copy.queue.endsWith('.parked') && !record.runs.some((r) => r.behaviour.kind === 'park')) {
        fail(
          `${record.id} is on '${copy.queue}' though nothing parked it (runs: ${describeRuns(record)})`,
        )
      }
    }

    // Copies keep the headers another library wrote, types and all.
    if (record.foreign) {
      for (const delivery of deliveries) {
        for (const copy of delivery.copies) {
          for (const [key, value] of Object.entries(FOREIGN_HEADERS)) {
            if (JSON.stringify(copy.headers[key]) !== JSON.stringify(value)) {
              fail(
                `${record.id}: its copy to '${copy.routingKey}' has ${key} = ${JSON.stringify(copy.headers[key])}, not ${JSON.stringify(value)}`,
              )
            }
          }
        }
      }
    }

    // A success the engine could settle, it settled: the ack written, or a move acked.
    for (const run of record.runs) {
      const delivery = run.delivery
      if (delivery === undefined || possiblyAbandoned(run)) continue
      const lostToFault = delivery.death?.cause === 'fault'
      if (run.succeeded && delivery.written?.kind !== 'ack' && !lostToFault) {
        fail(
          `${record.id}: run ${run.serial} succeeded, yet its ack was not written (${delivery.written?.kind ?? delivery.death?.cause ?? 'never settled'})`,
        )
      }
      if (
        !run.succeeded &&
        delivery.copies.some((c) => c.outcome === 'confirmed') &&
        delivery.written?.kind !== 'ack' &&
        !lostToFault
      ) {
        fail(
          `${record.id}: run ${run.serial}'s copy was confirmed, yet the original was not acked (${delivery.written?.kind ?? delivery.death?.cause ?? 'never settled'})`,
        )
      }
      if (
        run.succeeded &&
        store !== undefined &&
        run.claim !== undefined &&
        !run.claim.confirmAsked
      ) {
        fail(`${record.id}: run ${run.serial} succeeded and its claim was never confirmed`)
      }
    }

    // With an idempotent store, the success happened once unless a lease lapsed.
    if (store !== undefined && successes.length > 1) {
      for (const later of successes.slice(1)) {
        const earlier = successes.find((s) => s !== later && s.serial < later.serial)
        if (earlier === undefined || later.claim === undefined) continue
        const confirmedSeq = earlier.claim?.confirmedSeq
        if (confirmedSeq !== undefined && confirmedSeq < later.claim.grantedSeq) {
          fail(
            `${record.id} succeeded twice (runs ${earlier.serial} and ${later.serial}) though the first was confirmed before the second claim`,
          )
        }
      }
    }
  }
}

function describeRuns(record: MessageRecord): string {
  if (record.runs.length === 0) return 'none'
  return record.runs
    .map((r) => `#${r.serial}@${r.startedAt}${r.succeeded ? '✓' : '✗'}${r.behaviour.kind}`)
    .join(' ')
}
