import { ConsumerOptions, RetryPolicy, Topology, type AceMq } from '@acemq/core'
import { KyselyIdempotencyStore, createTableSql } from '@acemq/store-kysely'
import { connect } from '@acemq/transport-amqp'
import { DATABASE_URL, uniqueName } from '@acemq/testing'
import { Kysely, PostgresDialect, sql } from 'kysely'
import pg from 'pg'
import type { NetnsCluster, NetnsNode } from '../../test-support/netns-cluster.js'
import { printAccounting } from './accounting.js'
import { checkDeliveries, checkRows, type DeliveryCheck } from './delivery-check.js'
import { NumberedPublisher, type PublishRecord } from './numbered-publisher.js'
import { effectsDatabase, survivePostgresRestarts, type EffectsDatabase } from './support.js'

export const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, ms))

/** Short heartbeats and connect timeouts: a cut path is noticed in seconds, not minutes. */
const CLIENT = {
  heartbeat: '2s',
  connectTimeout: '3s',
  nodeOrder: 'in-order',
  recovery: { initialDelay: 100, maxDelay: 1_000 },
  logger: { warn: () => undefined },
} as const
const CLAIM_TIMEOUT_MS = 3_000
const RATE = 100

/** What a client's `health()` said while a scenario ran: statuses seen, and every DEGRADED's reasons. */
export interface HealthSeen {
  readonly statuses: Set<string>
  /** The `connection` report's details of every DEGRADED sample (`recovering=…`). */
  readonly degraded: Set<string>
  /** A sample that threw (must not happen: health never throws). */
  errors: number
}

/** A consumer client of a scenario. */
export interface ScenarioConsumer {
  readonly name: string
  readonly mq: AceMq
  /** `Date.now()` of each side effect this consumer made. */
  readonly effectsAt: number[]
}

/** What a scenario's disruption gets to work with. */
export interface ScenarioContext {
  readonly cluster: NetnsCluster
  readonly queue: string
  readonly publisher: AceMq
  readonly consumers: readonly ScenarioConsumer[]
  /** Set the moment the partition starts (`Date.now()`), for the time-to-resume. */
  cutAt: number
  /** Extra accounting rows. */
  readonly notes: [string, string | number][]
}

/** A scenario: which node leads the queue, where each client connects first, the disruption. */
export interface Scenario {
  readonly name: string
  readonly title: string
  /** The node whose connection declares the queue (its leader). */
  readonly leader: number
  /** Node order of the publisher's connection (the first is where it connects). */
  readonly publisherNodes: readonly number[]
  /** Node order of each consumer's connection. */
  readonly consumerNodes: readonly (readonly number[])[]
  /** Handler time in ms (a slow handler keeps deliveries in flight). */
  readonly handlerMs?: number
  /** Cuts, waits, heals. A client it closes on purpose is named in `closed`. */
  disrupt(context: ScenarioContext): Promise<void>
  /** Clients closed on purpose during the disruption: DOWN is what the docs say then. */
  readonly closed?: readonly string[]
}

/** What one scenario measured. */
export interface ScenarioResult {
  readonly check: DeliveryCheck
  readonly records: PublishRecord[]
  /** Longest time no consumer made a side effect, from the cut to the end (ms). */
  readonly longestStallMs: number
  /** From the cut to the first side effect after the cluster was whole again (ms). */
  readonly resumeMs: number
  readonly health: ReadonlyMap<string, HealthSeen>
  /** Each client's `health()` status once everything was handled (closed ones left out). */
  readonly finalHealth: ReadonlyMap<string, string>
  readonly durationMs: number
}

/** The Postgres side of the partition tests: one idempotency table and one side-effect table. */
export class PartitionWorld {
  private constructor(
    readonly cluster: NetnsCluster,
    readonly database: EffectsDatabase,
    private readonly db: Kysely<Record<string, never>>,
    private readonly store: KyselyIdempotencyStore,
  ) {}

  /** Every record of every scenario, for the whole run's check. */
  readonly allRecords: PublishRecord[] = []
  readonly #open = new Set<AceMq>()

  static async create(cluster: NetnsCluster): Promise<PartitionWorld> {
    const database = await effectsDatabase((table) =>
      createTableSql({ table, dialect: 'postgres' }),
    )
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 8 })
    survivePostgresRestarts(pool)
    const db = new Kysely<Record<string, never>>({ dialect: new PostgresDialect({ pool }) })
    const store = new KyselyIdempotencyStore(db, {
      table: database.idempotencyTable,
      claimTimeout: CLAIM_TIMEOUT_MS,
    })
    return new PartitionWorld(cluster, database, db, store)
  }

  async #connect(nodes: readonly number[], name: string): Promise<AceMq> {
    const urls = nodes.map((i) => (this.cluster.nodes[i] as NetnsNode).url)
    const mq = await connect(urls, { ...CLIENT, connectionName: name })
    this.#open.add(mq)
    return mq
  }

  /** Side effects of the ids starting with `prefix`: id → the consumers that made them. */
  async effects(prefix: string): Promise<Map<string, string[]>> {
    const all = await this.database.effects()
    return new Map([...all].filter(([id]) => id.startsWith(prefix)))
  }

  async run(scenario: Scenario): Promise<ScenarioResult> {
    // Whatever an earlier scenario left, each starts on a whole cluster.
    await this.cluster.heal()
    await this.#awaitHealed([])
    const started = Date.now()
    const prefix = `${scenario.name}-`
    const queue = uniqueName(`partitions.${scenario.name}`)
    const declarer = await this.#connect([scenario.leader], `${scenario.name}-declare`)
    await declarer.applyTopology(
      Topology.define().queueWithRetry(queue, RetryPolicy.fixed(50, 200)),
    )
    await declarer.close({ drainTimeout: 0 })
    this.#open.delete(declarer)

    const consumers: ScenarioConsumer[] = []
    for (const [k, nodes] of scenario.consumerNodes.entries()) {
      const name = `${scenario.name}-c${k}`
      const consumer: ScenarioConsumer = {
        name,
        mq: await this.#connect(nodes, name),
        effectsAt: [],
      }
      await consumer.mq.consume<{ n: number }>(
        queue,
        ConsumerOptions.defaults()
          .idempotent(this.store)
          .withRetry(RetryPolicy.fixed(50, 200))
          .withPrefetch(20)
          .withConcurrency(4)
          .withInProgressDelay(200),
        async (message) => {
          if (scenario.handlerMs !== undefined) await sleep(scenario.handlerMs)
          await sql`insert into ${sql.table(this.database.effectsTable)} (message_id, worker) values (${message.envelope.id}, ${name})`.execute(
            this.db,
          )
          consumer.effectsAt.push(Date.now())
        },
      )
      consumers.push(consumer)
    }
    const publisherMq = await this.#connect(scenario.publisherNodes, `${scenario.name}-publisher`)
    const publisher = new NumberedPublisher(publisherMq, queue, {
      total: 1_000_000,
      prefix,
      window: 20,
      ratePerSecond: RATE,
      giveUpAfterMs: 60_000,
    })
    const publishing = publisher.run()
    const context: ScenarioContext = {
      cluster: this.cluster,
      queue,
      publisher: publisherMq,
      consumers,
      cutAt: 0,
      notes: [],
    }
    const health = new Map<string, HealthSeen>()
    const clients: [string, AceMq][] = [
      ['publisher', publisherMq],
      ...consumers.map((c) => [c.name, c.mq] as [string, AceMq]),
    ]
    for (const [name] of clients) {
      health.set(name, { statuses: new Set(), degraded: new Set(), errors: 0 })
    }
    let sampling = true
    const sampler = (async () => {
      while (sampling) {
        for (const [name, mq] of clients) {
          if (context.cutAt === 0 || scenario.closed?.includes(name)) continue
          const seen = health.get(name) as HealthSeen
          try {
            const result = await mq.health()
            seen.statuses.add(result.status)
            if (result.status !== 'UP') {
              for (const report of result.reports.filter((r) => r.status !== 'UP')) {
                seen.degraded.add(`${report.name}:${Object.keys(report.details).sort().join('+')}`)
              }
            }
          } catch {
            seen.errors++
          }
        }
        await sleep(200)
      }
    })()

    try {
      await publisher.whenStarted(300)
      await scenario.disrupt(context)
      await this.#awaitHealed(context.notes)
      // Traffic after the heal, then every confirmed message handled.
      const healedAt = Date.now()
      await publisher.whenStarted(publisher.started + 300)
      publisher.stop()
      await publishing
      const records = [...publisher.records.values()]
      const deadline = Date.now() + 90_000
      for (;;) {
        const effects = await this.effects(prefix)
        if (records.every((r) => !r.confirmed || effects.has(r.id))) break
        if (Date.now() > deadline) break
        await sleep(500)
      }
      await sleep(2 * CLAIM_TIMEOUT_MS)
      sampling = false
      await sampler
      const finalHealth = new Map<string, string>()
      for (const [name, mq] of clients) {
        if (!scenario.closed?.includes(name)) finalHealth.set(name, (await mq.health()).status)
      }
      const effects = await this.effects(prefix)
      const check = checkDeliveries(records, effects)
      const times = consumers.flatMap((c) => c.effectsAt).filter((t) => t >= context.cutAt)
      times.sort((a, b) => a - b)
      let longestStallMs = (times[0] ?? Date.now()) - context.cutAt
      for (let i = 1; i < times.length; i++) {
        longestStallMs = Math.max(longestStallMs, (times[i] as number) - (times[i - 1] as number))
      }
      const afterHeal = times.find((t) => t >= healedAt) ?? Date.now()
      const result: ScenarioResult = {
        check,
        records,
        longestStallMs,
        resumeMs: afterHeal - context.cutAt,
        health,
        finalHealth,
        durationMs: Date.now() - started,
      }
      printAccounting(`partitions: ${scenario.title}`, [
        ...checkRows(check),
        ...[...publisher.errorCounts].map(
          ([name, n]) => [`failed sends: ${name}`, n] as [string, number],
        ),
        [
          'longest time without a side effect from the cut (s)',
          (longestStallMs / 1_000).toFixed(1),
        ],
        ...[...health].map(
          ([name, seen]) =>
            [
              `health seen: ${name}`,
              `${[...seen.statuses].join('/')} ${[...seen.degraded].join(' ')}`.trim(),
            ] as [string, string],
        ),
        ...context.notes,
        ['scenario seconds', ((Date.now() - started) / 1_000).toFixed(1)],
      ])
      return result
    } finally {
      sampling = false
      publisher.stop()
      // A sender that was pacing when the run failed still sends once: wait for it (bounded by
      // the publisher's give-up time), so that the whole run knows every id that was sent.
      await Promise.race([publishing, sleep(65_000)])
      this.allRecords.push(...publisher.records.values())
      await this.cluster.heal().catch(() => undefined)
      await this.closeAll()
    }
  }

  /**
   * Waits for the cluster to be whole again after a heal. A node that `pause_minority` paused
   * starts again by itself once it sees the majority; one whose boot has not finished within
   * 45 s (seen here: it hangs in Erlang's `global` after "Global hang workaround" in its log,
   * its peers listing it as running) is restarted, as an operator would, and the fact noted.
   */
  async #awaitHealed(notes: [string, string | number][]): Promise<void> {
    try {
      await this.cluster.awaitHealed(45_000)
      return
    } catch {
      // Look for stuck nodes below.
    }
    for (const [i, node] of this.cluster.nodes.entries()) {
      try {
        await node.ctl('cluster_status', '--formatter', 'json')
      } catch {
        notes.push([`node ${i} stuck 45 s after the heal`, 'restarted'])
        this.restarts++
        await this.cluster.restart(i)
      }
    }
    await this.cluster.awaitHealed(120_000)
  }

  /** Nodes restarted because they were stuck after a heal. */
  restarts = 0

  async closeAll(): Promise<void> {
    await Promise.all(
      [...this.#open].map((mq) => mq.close({ drainTimeout: 0 }).catch(() => undefined)),
    )
    this.#open.clear()
  }

  /** The whole run's check: every scenario's records against every side effect. */
  async wholeRun(): Promise<DeliveryCheck> {
    return checkDeliveries(this.allRecords, await this.database.effects())
  }

  async destroy(): Promise<void> {
    await this.closeAll()
    await this.db.destroy()
    await this.database.drop()
  }
}
