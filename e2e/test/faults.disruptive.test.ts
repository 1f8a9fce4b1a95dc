import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { RetryPolicy, Topology, type AceMq } from '@acemq/core'
import { createTableSql } from '@acemq/store-kysely'
import { connect } from '@acemq/transport-amqp'
import {
  LOCK_WAIT_TIMEOUT,
  clearMemoryAlarm,
  holdBrokerFaultLock,
  rabbitmqctl,
  raiseMemoryAlarm,
  type HeldLock,
} from '../../test-support/broker-faults.js'
import { requirePostgres, requireRabbit } from '@acemq/testing'
import { printAccounting } from './accounting.js'
import { BrokerVhost } from '../../test-support/broker-vhost.js'
import { NumberedPublisher } from './numbered-publisher.js'
import { ensurePostgresRunning, hasLocalPostgres, stopPostgres } from './postgres-faults.js'
import {
  effectsDatabase,
  startIdempotentWorker,
  startProgram,
  type Child,
  type EffectsDatabase,
} from './support.js'

const ready = (await requireRabbit()) && (await requirePostgres())

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** Polls `condition` every `intervalMs` until it holds, or throws after `timeoutMs`. */
async function poll(
  condition: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
  intervalMs = 50,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await condition()) return
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms`)
    await sleep(intervalMs)
  }
}

function count(child: Child, line: string): number {
  return child.lines.filter((l) => l === line).length
}

function alive(child: Child): boolean {
  return child.process.exitCode === null && child.process.signalCode === null
}

/** Asks a worker for one `<KIND> <json>` answer to `command`. */
async function ask<T>(child: Child, command: string, kind: string): Promise<T> {
  const from = child.lines.length
  child.send(command)
  const line = await child.waitFor(new RegExp(`^${kind} `), 10_000, from)
  return JSON.parse(line.slice(kind.length + 1)) as T
}

interface WorkerStats {
  readonly handled: number
  readonly storeErrors: number
  readonly moveErrors: number
  readonly otherErrors: number
  readonly poolErrors: number
  readonly reconnected: number
}

describe.runIf(ready)('the faults run', () => {
  /** Messages in the run, and how many are published between two faults. */
  const SEGMENT = 200
  /** Messages published at full speed just before the memory alarm, for the consumers to drain during it. */
  const BACKLOG = 600
  /** 14 faults, a segment apart (the alarm's backlog on top), and a segment after the last. */
  const TOTAL = 15 * SEGMENT + BACKLOG
  const RATE = 100
  const CLAIM_TIMEOUT_MS = 3_000
  const CONCURRENCY = 2
  const POLICY = RetryPolicy.fixed(50, 200)
  const queue = 'faults.work'

  let vhost: BrokerVhost
  let database: EffectsDatabase
  let mq: AceMq
  const started: Child[] = []
  let brokerStopped = false
  let alarmRaised = false
  // Held for the whole run: every fault below is injected under it, and no other test's
  // fault lands in the middle of the run.
  let lock: HeldLock | undefined

  function startWorker(name: string): Child {
    const worker = startIdempotentWorker(vhost.url, queue, database, name, {
      CLAIM_TIMEOUT_MS: String(CLAIM_TIMEOUT_MS),
      HANDLER_MS: '20',
      PREFETCH: '10',
      CONCURRENCY: String(CONCURRENCY),
    })
    started.push(worker)
    return worker
  }

  beforeAll(async () => {
    if (!hasLocalPostgres()) {
      throw new Error(
        'the faults run restarts Postgres, so it needs the local cluster (pg_ctlcluster)',
      )
    }
    lock = await holdBrokerFaultLock()
    vhost = await BrokerVhost.create('acemq-e2e-faults')
    database = await effectsDatabase((table) => createTableSql({ table, dialect: 'postgres' }))
    mq = await connect(vhost.url, {
      connectionName: 'e2e-faults-publisher',
      recovery: { initialDelay: 100, maxDelay: 1_000 },
    })
    await mq.applyTopology(Topology.define().queueWithRetry(queue, POLICY))
  }, LOCK_WAIT_TIMEOUT + 60_000)

  afterAll(async () => {
    for (const child of started) {
      if (alive(child)) child.process.kill('SIGKILL')
      await child.exited
    }
    // Whatever failed above, the broker and the database are left as they were found.
    if (brokerStopped) await rabbitmqctl('start_app').catch(() => undefined)
    if (alarmRaised) await clearMemoryAlarm().catch(() => undefined)
    await ensurePostgresRunning()
    await mq?.close({ drainTimeout: 0 })
    await vhost?.delete()
    await database?.drop()
    await lock?.release()
  }, 120_000)

  it('handles every confirmed message exactly once through ten dropped connections, a broker restart, a killed consumer, a Postgres restart and a memory alarm', async () => {
    const live = [startWorker('w1'), startWorker('w2')]
    await Promise.all(live.map((worker) => worker.waitFor(/^READY$/, 30_000)))

    let publisherReconnects = 0
    mq.transport.onEvent((event) => {
      if (event.type === 'reconnected') publisherReconnects++
    })
    const publisher = new NumberedPublisher(mq, queue, {
      total: TOTAL,
      window: 50,
      ratePerSecond: RATE,
      initialLimit: 0,
      giveUpAfterMs: 120_000,
    })

    /** Waits until the publisher's connection and every live worker have come back. */
    async function everyoneReconnects(
      action: () => Promise<void>,
      timeoutMs: number,
    ): Promise<void> {
      const before = {
        publisher: publisherReconnects,
        workers: live.map((w) => count(w, 'EVENT reconnected')),
      }
      await action()
      try {
        await poll(
          () =>
            publisherReconnects > before.publisher &&
            live.every((w, i) => count(w, 'EVENT reconnected') > (before.workers[i] ?? 0)),
          timeoutMs,
          'every connection recovering',
        )
      } catch (error) {
        const workers = live.map(
          (w, i) =>
            `worker ${i}: reconnected ${before.workers[i]} -> ${count(w, 'EVENT reconnected')}, last lines:\n  ${w.lines.slice(-15).join('\n  ')}`,
        )
        throw new Error(
          `${(error as Error).message}: publisher reconnected ${before.publisher} -> ${publisherReconnects} (state ${JSON.stringify(mq.transport.state)})\n${workers.join('\n')}`,
          { cause: error },
        )
      }
    }

    async function handledIds(): Promise<Set<string>> {
      return new Set((await database.effects()).keys())
    }

    let closes = 0
    const closeConnections = async (): Promise<void> => {
      closes++
      await everyoneReconnects(() => vhost.closeAllConnections(), 30_000)
    }

    const restartBroker = async (): Promise<void> => {
      await everyoneReconnects(async () => {
        brokerStopped = true
        try {
          await rabbitmqctl('stop_app')
          await sleep(1_000)
        } finally {
          await rabbitmqctl('start_app')
          await rabbitmqctl('await_startup')
          brokerStopped = false
        }
      }, 60_000)
    }

    let stalledIds: string[] = []
    const killConsumer = async (): Promise<void> => {
      const victim = live[1] as Child
      const from = victim.lines.length
      victim.send('stall')
      // Once CONCURRENCY handlers are stalled, nothing else runs: the process holds exactly
      // those claims, and no handler is between its side effect and its confirm.
      await poll(
        () =>
          victim.lines.slice(from).filter((l) => l.startsWith('STALLED ')).length >= CONCURRENCY,
        20_000,
        'the victim holding its claims',
      )
      stalledIds = victim.lines
        .slice(from)
        .filter((l) => l.startsWith('STALLED '))
        .map((l) => l.slice('STALLED '.length))
      victim.process.kill('SIGKILL')
      expect(await victim.exited).toBe('SIGKILL')
      const replacement = startWorker('w3')
      await replacement.waitFor(/^READY$/, 30_000)
      live[1] = replacement
    }

    // Postgres is down until a worker has met it (a claim the store could not answer), so the
    // fault is felt however quickly the server would have come back: a bare restart can fall
    // between two claims.
    const storeErrorsOfLive = async (): Promise<number> => {
      const stats = await Promise.all(live.map((w) => ask<WorkerStats>(w, 'stats', 'STATS')))
      return stats.reduce((sum, s) => sum + s.storeErrors, 0)
    }
    const restartDatabase = async (): Promise<void> => {
      const before = await storeErrorsOfLive()
      try {
        await stopPostgres()
        await poll(
          async () => (await storeErrorsOfLive()) > before,
          30_000,
          'a worker meeting the stopped database',
          200,
        )
      } finally {
        await ensurePostgresRunning()
      }
    }

    const alarm = { refused: 0, backlog: 0, drained: 0 }
    const memoryAlarm = async (at: number): Promise<void> => {
      // A backlog, published at full speed, for the consumers to drain while publishing is
      // blocked. (Only these: a message of an earlier fault that is still being put back
      // would wait for the alarm to clear, as the engine's own moves do.)
      publisher.ratePerSecond = Infinity
      publisher.allow(at + BACKLOG)
      await publisher.whenSettledUpTo(at + BACKLOG)
      const backlog = Array.from({ length: BACKLOG }, (_, i) => publisher.id(at + 1 + i))
      const refusedBefore = publisher.errorCounts.get('ConnectionBlockedError') ?? 0
      alarmRaised = true
      try {
        await raiseMemoryAlarm()
        const handledAtAlarm = await handledIds()
        alarm.backlog = backlog.filter((id) => !handledAtAlarm.has(id)).length
        // The next publishes are held by the broker (written, not confirmed); once it has
        // told the connection it is blocked, new ones are refused at once, and the publisher
        // retries them after the alarm.
        publisher.allow(at + BACKLOG + SEGMENT)
        await poll(() => mq.transport.state.blocked, 20_000, 'the broker blocking publishes')
        for (let i = 0; i < 3; i++) publisher.startNext()
        await poll(
          () => (publisher.errorCounts.get('ConnectionBlockedError') ?? 0) > refusedBefore,
          20_000,
          'a publish refused with ConnectionBlockedError',
        )
        const health = await mq.health()
        expect(health.status).toBe('UP')
        expect(health.reports.find((r) => r.name === 'connection')?.details).toMatchObject({
          blocked: 'true',
          blockedReason: 'low on memory',
        })
        // Consumers keep draining: the whole backlog is handled while the alarm lasts.
        await poll(
          async () => {
            const handled = await handledIds()
            return backlog.every((id) => handled.has(id))
          },
          30_000,
          'the backlog drained during the alarm',
          200,
        )
        alarm.drained = alarm.backlog
        for (const worker of live) {
          const json = await ask<{ status: string }>(worker, 'health', 'HEALTH')
          expect(json.status).toBe('UP')
        }
        alarm.refused = (publisher.errorCounts.get('ConnectionBlockedError') ?? 0) - refusedBefore
      } finally {
        await clearMemoryAlarm()
        alarmRaised = false
      }
      publisher.ratePerSecond = RATE
    }

    const faults: [string, (at: number) => Promise<void>][] = [
      ['close_all_connections 1', closeConnections],
      ['close_all_connections 2', closeConnections],
      ['close_all_connections 3', closeConnections],
      ['stop_app / start_app', restartBroker],
      ['close_all_connections 4', closeConnections],
      ['close_all_connections 5', closeConnections],
      ['SIGKILL w2 holding claims', killConsumer],
      ['close_all_connections 6', closeConnections],
      ['close_all_connections 7', closeConnections],
      ['Postgres stop / start', restartDatabase],
      ['close_all_connections 8', closeConnections],
      ['close_all_connections 9', closeConnections],
      ['memory alarm', memoryAlarm],
      ['close_all_connections 10', closeConnections],
    ]
    // Fault k is injected once `points[k]` messages have been published. The alarm's backlog
    // is published at its point, so the next fault comes a backlog later.
    const alarmAt = faults.findIndex(([, inject]) => inject === memoryAlarm)
    const points = faults.map((_, k) => SEGMENT * (k + 1) + (k > alarmAt ? BACKLOG : 0))
    // While fault k is injected the publisher may go on up to the next fault's point, never
    // further; before the alarm, up to the end of its backlog.
    const limitDuring = (k: number): number =>
      k === alarmAt ? (points[k] as number) + BACKLOG : (points[k + 1] ?? TOTAL)
    expect((points.at(-1) ?? 0) + SEGMENT).toBe(TOTAL)

    const runStarted = Date.now()
    publisher.allow(limitDuring(0))
    const publishing = publisher.run()
    const timings: [string, string | number][] = []
    for (const [k, [name, inject]] of faults.entries()) {
      const at = points[k] as number
      await publisher.whenStarted(at)
      const startedAt = Date.now()
      console.log(`faults run: ${name} at ${at} (published ${publisher.started})`)
      await inject(at)
      timings.push([`fault at ${String(at).padStart(4)}: ${name} (ms)`, Date.now() - startedAt])
      publisher.allow(limitDuring(k + 1))
    }
    publisher.allow(TOTAL)
    await publishing

    // Every confirmed message handled, the queue empty; then a moment for anything late.
    const confirmedIds = [...publisher.records.values()].filter((r) => r.confirmed).map((r) => r.id)
    await poll(
      async () => {
        const handled = await handledIds()
        return confirmedIds.every((id) => handled.has(id))
      },
      90_000,
      'every confirmed message handled',
      250,
    )
    await poll(() => vhost.isEmpty(queue), 60_000, `the queue '${queue}' empty`, 500)
    await sleep(2 * CLAIM_TIMEOUT_MS)

    const effects = await database.effects()
    const queues = await vhost.queueCounts()
    const workerStats = await Promise.all(live.map((w) => ask<WorkerStats>(w, 'stats', 'STATS')))
    for (const worker of live) worker.process.kill('SIGTERM')
    const exits = await Promise.all(live.map((w) => w.exited))
    const elapsed = Date.now() - runStarted

    const records = [...publisher.records.values()]
    const confirmed = new Set(confirmedIds)
    const unconfirmed = records.filter((r) => !r.confirmed).map((r) => r.id)
    const totalEffects = [...effects.values()].reduce((sum, workers) => sum + workers.length, 0)
    const duplicated = [...effects].filter(([, workers]) => workers.length > 1)
    const lost = confirmedIds.filter((id) => !effects.has(id))
    const confirmLostDelivered = unconfirmed.filter((id) => effects.has(id))
    const unknown = [...effects.keys()].filter((id) => !publisher.records.has(id))
    const leftOnQueue = (queues.get(queue)?.ready ?? 0) + (queues.get(queue)?.unacked ?? 0)
    const parked = queues.get(`${queue}.parked`)?.ready ?? 0
    const deadLettered = queues.get(`${queue}.dlq`)?.ready ?? 0
    const reconnects = Object.fromEntries(
      started.map((w, i) => [`w${i + 1}`, count(w, 'EVENT reconnected')]),
    )
    const storeErrors = workerStats.reduce((sum, s) => sum + s.storeErrors, 0)
    const moveErrors = workerStats.reduce((sum, s) => sum + s.moveErrors, 0)
    // What the workers' transports warned about, by kind (queue names and numbers folded).
    const warnings = new Map<string, number>()
    for (const line of started.flatMap((w) => w.lines)) {
      if (!line.startsWith('[acemq/transport-amqp]')) continue
      const kind = line
        .slice('[acemq/transport-amqp] '.length)
        .replace(/\d+/g, 'N')
        .replace(/:.*$/, '')
        .slice(0, 70)
      warnings.set(kind, (warnings.get(kind) ?? 0) + 1)
    }

    printAccounting(`faults run: ${TOTAL} messages, ${faults.length} faults, ${elapsed} ms`, [
      ['published (ids)', records.length],
      ['publish attempts', records.reduce((sum, r) => sum + r.attempts, 0)],
      ...[...publisher.errorCounts].map(
        ([name, n]) => [`  failed sends: ${name}`, n] as [string, number],
      ),
      ['confirmed', confirmed.size],
      ['not confirmed', unconfirmed.length],
      ['handled (distinct ids)', effects.size],
      ['side effects (rows)', totalEffects],
      ['duplicates', totalEffects - effects.size],
      ['lost (confirmed, never handled)', lost.length],
      ['confirm lost, delivered', confirmLostDelivered.length],
      ['effects for unknown ids', unknown.length],
      ['left on the queue', leftOnQueue],
      ['parked', parked],
      ['dead-lettered', deadLettered],
      ['reconnects survived: publisher', publisherReconnects],
      ...Object.entries(reconnects).map(
        ([name, n]) => [`reconnects survived: ${name}`, n] as [string, number],
      ),
      ['claims held by the killed worker', stalledIds.length],
      ['store failures recovered (workers alive at the end)', storeErrors],
      ['failed moves handed back (workers alive at the end)', moveErrors],
      ...[...warnings].map(([kind, n]) => [`worker warning: ${kind}`, n] as [string, number]),
      ['publishes refused during the alarm', alarm.refused],
      ['backlog left when the alarm was raised', alarm.backlog],
      ['of it, drained during the alarm', alarm.drained],
      ...timings,
      ['waited for the broker-fault lock (ms)', lock?.waitedMs ?? 0],
    ])

    expect(closes).toBe(10)
    expect(unconfirmed).toEqual([])
    expect(lost).toEqual([])
    expect(duplicated).toEqual([])
    expect(unknown).toEqual([])
    expect(effects.size).toBe(confirmed.size + confirmLostDelivered.length)
    expect(leftOnQueue).toBe(0)
    expect(parked).toBe(0)
    expect(deadLettered).toBe(0)
    // The claims the killed worker held were taken over after their lease, by someone else.
    expect(stalledIds).toHaveLength(CONCURRENCY)
    for (const id of stalledIds) {
      expect(effects.get(id)).toHaveLength(1)
      expect(effects.get(id)?.[0]).not.toBe('w2')
    }
    // Every fault was felt: each connection came back from every drop and the broker restart.
    expect(publisherReconnects).toBeGreaterThanOrEqual(11)
    expect(reconnects['w1']).toBeGreaterThanOrEqual(11)
    expect((reconnects['w2'] ?? 0) + (reconnects['w3'] ?? 0)).toBeGreaterThanOrEqual(11)
    expect(storeErrors).toBeGreaterThan(0)
    expect(alarm.refused).toBeGreaterThan(0)
    expect(alarm.drained).toBeGreaterThan(0)
    // And both survivors still shut down cleanly.
    expect(exits).toEqual([0, 0])
  }, 300_000)
})

interface SoakStats {
  readonly rss: number
  readonly heapUsed: number
  readonly resources: Record<string, number>
  readonly gc: boolean
}

interface SoakProgress {
  readonly sent: number
  readonly confirmed: number
  readonly failed: number
  readonly handled: number
}

describe.runIf(ready)('a soak of 50 forced reconnects with steady traffic', () => {
  const RECONNECTS = 50
  const WARM_UP = 3
  const queue = 'soak.work'
  let vhost: BrokerVhost
  let client: Child | undefined
  let lock: HeldLock | undefined

  beforeAll(async () => {
    lock = await holdBrokerFaultLock()
    vhost = await BrokerVhost.create('acemq-e2e-soak')
  }, LOCK_WAIT_TIMEOUT + 60_000)

  afterAll(async () => {
    if (client !== undefined && alive(client)) client.process.kill('SIGKILL')
    await client?.exited
    await vhost?.delete()
    await lock?.release()
  }, 60_000)

  it('keeps resident memory within 1.5 x its baseline and open handles flat, and is still consuming at the end', async () => {
    // A process of its own, so that its memory and handles are the connection's alone.
    const soak = startProgram(
      'soak-client',
      { AMQP_URL: vhost.url, QUEUE: queue, RATE: '100' },
      { nodeArgs: ['--expose-gc'] },
    )
    client = soak
    await soak.waitFor(/^READY$/, 30_000)
    const progress = (): Promise<SoakProgress> => ask<SoakProgress>(soak, 'progress', 'PROGRESS')

    /** Drops the connections and waits until the client is back and consuming again. */
    const reconnect = async (): Promise<void> => {
      const before = count(soak, 'EVENT reconnected')
      await vhost.closeAllConnections()
      await poll(
        () => count(soak, 'EVENT reconnected') > before,
        30_000,
        'the soak client reconnecting',
      )
      const { handled } = await progress()
      await poll(
        async () => (await progress()).handled > handled,
        10_000,
        'the soak client consuming again',
        50,
      )
    }

    const started = Date.now()
    for (let i = 0; i < WARM_UP; i++) await reconnect()
    await sleep(1_000)
    const baseline = await ask<SoakStats>(soak, 'stats', 'STATS')
    for (let i = 0; i < RECONNECTS; i++) await reconnect()
    await sleep(1_000)
    const final = await ask<SoakStats>(soak, 'stats', 'STATS')
    const { handled: handledAtEnd } = await progress()
    await poll(
      async () => (await progress()).handled > handledAtEnd,
      10_000,
      'the consumer still consuming after the last reconnect',
      50,
    )

    // Every confirmed message was consumed (at least once: the soak has no idempotency).
    soak.send('stop')
    const stopped = JSON.parse(
      (await soak.waitFor(/^STOPPED /, 10_000)).slice('STOPPED '.length),
    ) as SoakProgress
    let seen = { confirmed: [] as number[], handled: [] as number[] }
    await poll(
      async () => {
        seen = await ask<typeof seen>(soak, 'handled', 'HANDLED')
        const handled = new Set(seen.handled)
        return seen.confirmed.every((n) => handled.has(n))
      },
      30_000,
      'every confirmed message consumed',
      250,
    )
    soak.send('close')
    expect(await soak.exited).toBe(0)
    const reconnects = count(soak, 'EVENT reconnected')

    const types = [
      ...new Set([...Object.keys(baseline.resources), ...Object.keys(final.resources)]),
    ]
    const handleRows = types
      .sort()
      .map(
        (type) =>
          [
            `  ${type} (baseline -> end)`,
            `${baseline.resources[type] ?? 0} -> ${final.resources[type] ?? 0}`,
          ] as [string, string],
      )
    const mb = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MB`
    printAccounting(`soak: ${RECONNECTS} forced reconnects, ${Date.now() - started} ms`, [
      ['reconnects survived', reconnects],
      ['sent', stopped.sent],
      ['confirmed', stopped.confirmed],
      ['failed while recovering', stopped.failed],
      ['handled (deliveries)', stopped.handled],
      [
        'confirmed and never handled',
        seen.confirmed.filter((n) => !seen.handled.includes(n)).length,
      ],
      ['resident memory (baseline -> end)', `${mb(baseline.rss)} -> ${mb(final.rss)}`],
      ['heap used (baseline -> end)', `${mb(baseline.heapUsed)} -> ${mb(final.heapUsed)}`],
      ['active handles and requests', ''],
      ...handleRows,
    ])

    expect(baseline.gc).toBe(true)
    expect(reconnects).toBe(WARM_UP + RECONNECTS)
    expect(final.rss).toBeLessThanOrEqual(1.5 * baseline.rss)
    for (const type of types) {
      expect(final.resources[type] ?? 0, type).toBeLessThanOrEqual(
        (baseline.resources[type] ?? 0) + 2,
      )
    }
  }, 300_000)
})
