import { ConsumerOptions, RetryPolicy, Topology, type AceMq } from '@acemq/core'
import { KyselyIdempotencyStore, createTableSql } from '@acemq/store-kysely'
import { connect, type AmqpTransport } from '@acemq/transport-amqp'
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

/** `promise`, or an error naming `what` once `ms` have passed (the promise goes on). */
async function within<T>(
  ms: number,
  what: string | (() => string),
  promise: Promise<T>,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      const said = typeof what === 'string' ? what : what()
      reject(new Error(`${said}: not within ${ms / 1_000} s`))
    }, ms)
  })
  try {
    return await Promise.race([promise, late])
  } finally {
    clearTimeout(timer)
  }
}

/** A line on the run's output at once (vitest prints a file's results only when it ends). */
function progress(line: string): void {
  console.info(`[partitions ${new Date().toISOString().slice(11, 19)}] ${line}`)
}

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
  /**
   * Handler time in ms of the first consumer (a slow handler keeps deliveries in flight
   * there); the others handle at full speed, so the backlog it leaves is worked off in seconds.
   */
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

/** Closes every client of `clients` at once, without draining; never throws. */
async function closeEach(clients: Iterable<AceMq>): Promise<void> {
  await Promise.all([...clients].map((mq) => mq.close({ drainTimeout: 0 }).catch(() => undefined)))
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

  /** A client of the scenario whose clients are `mine` (closed when it ends). */
  async #connect(nodes: readonly number[], name: string, mine: Set<AceMq>): Promise<AceMq> {
    const urls = nodes.map((i) => (this.cluster.nodes[i] as NetnsNode).url)
    const mq = await connect(urls, { ...CLIENT, connectionName: name })
    this.#open.add(mq)
    mine.add(mq)
    return mq
  }

  /** The last scenario's run, settled or not. */
  #previous: Promise<unknown> = Promise.resolve()

  /** Side effects of the ids starting with `prefix`: id → the consumers that made them. */
  async effects(prefix: string): Promise<Map<string, string[]>> {
    const all = await this.database.effects()
    return new Map([...all].filter(([id]) => id.startsWith(prefix)))
  }

  /**
   * Runs `scenario`, one at a time: a scenario that vitest gave up on (its timeout) goes on in
   * the background until its `finally` has healed the links and closed its clients, and the
   * next one waits for that (up to 2 min), so it never has its partition healed or its
   * clients closed by the last one. Every phase is bounded and said on the output as it
   * starts, and a failure is said at once with its phase.
   */
  async run(scenario: Scenario): Promise<ScenarioResult> {
    const previous = await within(120_000, 'the previous scenario ending', this.#previous).then(
      () => true,
      () => false,
    )
    if (!previous) progress(`${scenario.name}: the previous scenario never ended; going on`)
    const state = { phase: 'starting', started: Date.now() }
    const running = this.#run(scenario, (phase) => {
      state.phase = phase
      progress(`${scenario.name}: ${phase}`)
    })
    this.#previous = running.catch((error: unknown) => {
      const seconds = ((Date.now() - state.started) / 1_000).toFixed(1)
      progress(`${scenario.name}: FAILED after ${seconds} s in '${state.phase}': ${String(error)}`)
    })
    return running
  }

  async #run(scenario: Scenario, phase: (what: string) => void): Promise<ScenarioResult> {
    const mine = new Set<AceMq>()
    // Whatever an earlier scenario left, each starts on a whole cluster.
    phase('waiting for a whole cluster')
    await this.cluster.heal()
    await this.#awaitHealed([])
    phase('connecting')
    const started = Date.now()
    const prefix = `${scenario.name}-`
    const queue = uniqueName(`partitions.${scenario.name}`)
    const declarer = await this.#connect([scenario.leader], `${scenario.name}-declare`, mine)
    await declarer.applyTopology(
      Topology.define().queueWithRetry(queue, RetryPolicy.fixed(50, 200)),
    )
    await declarer.close({ drainTimeout: 0 })
    mine.delete(declarer)
    this.#open.delete(declarer)

    const consumers: ScenarioConsumer[] = []
    for (const [k, nodes] of scenario.consumerNodes.entries()) {
      const name = `${scenario.name}-c${k}`
      const consumer: ScenarioConsumer = {
        name,
        mq: await this.#connect(nodes, name, mine),
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
          if (k === 0 && scenario.handlerMs !== undefined) await sleep(scenario.handlerMs)
          await sql`insert into ${sql.table(this.database.effectsTable)} (message_id, worker) values (${message.envelope.id}, ${name})`.execute(
            this.db,
          )
          consumer.effectsAt.push(Date.now())
        },
      )
      consumers.push(consumer)
    }
    const publisherMq = await this.#connect(
      scenario.publisherNodes,
      `${scenario.name}-publisher`,
      mine,
    )
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

    /** What the publisher has not settled yet, for an error saying it hangs. */
    const unsettled = (): string => {
      const open = [...publisher.records.values()].filter(
        (r) => !r.confirmed && r.errors.at(-1) !== 'gave up',
      )
      const oldest = Math.min(...open.map((r) => r.firstSentAt))
      return `${open.length} sends not settled${open.length > 0 ? `, the oldest for ${((Date.now() - oldest) / 1_000).toFixed(1)} s` : ''} (${publisher.started} started, ${publisher.confirmed} confirmed)`
    }
    try {
      phase('publishing')
      await within(30_000, 'the first 300 publishes', publisher.whenStarted(300))
      phase('partition')
      await scenario.disrupt(context)
      phase('healed: waiting for a whole cluster')
      await this.#awaitHealed(context.notes)
      // Traffic after the heal, then every confirmed message handled.
      const healedAt = Date.now()
      phase('publishing after the heal')
      await within(
        60_000,
        () => `300 more publishes: ${unsettled()}`,
        publisher.whenStarted(publisher.started + 300),
      )
      publisher.stop()
      // Every send is confirmed or given up on (60 s): one that never settles is a hang.
      await within(75_000, () => `every send settled: ${unsettled()}`, publishing)
      phase('waiting for every confirmed message to be handled')
      const records = [...publisher.records.values()]
      let handled = await this.#awaitHandled(prefix, records)
      // RabbitMQ 3.10.8: a consumer whose channel died while its node was cut off can stay
      // listed by the quorum queue's leader, the deliveries it had checked out to it for ever
      // (no channel holds them: unacked, never redelivered). A new leader monitors every
      // consumer again and returns what a dead one held, so the leadership is moved, as an
      // operator would, and the messages it freed are counted apart (docs/reliability.md).
      let freed = 0
      if (!handled) {
        const held = await this.#heldForTheGone(queue)
        if (held > 0) {
          const missing = await this.#missing(prefix, records)
          phase(
            `${held} unacked on the leader, none ready, ${missing} unhandled: moving the leadership`,
          )
          await this.#moveLeadership(queue, context.notes)
          handled = await this.#awaitHandled(prefix, records)
          freed = missing - (await this.#missing(prefix, records))
          context.notes.push(
            ['unacked on the leader for a consumer gone', held],
            ['handled only once the leadership moved', freed],
          )
        }
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
      if (check.lost.length > 0) await this.#whereAreTheLost(queue, check.lost, clients)
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
      phase('ending: heal, clients closed')
      sampling = false
      publisher.stop()
      // A sender that was pacing when the run failed still sends once: wait for it (bounded by
      // the publisher's give-up time), so that the whole run knows every id that was sent.
      await Promise.race([publishing, sleep(65_000)])
      this.allRecords.push(...publisher.records.values())
      await this.cluster.heal().catch(() => undefined)
      await closeEach(mine)
      for (const mq of mine) this.#open.delete(mq)
    }
  }

  /**
   * Waits for the cluster to be whole again after a heal. A node that `pause_minority` paused
   * starts again by itself once it sees the majority; one whose boot has not finished within
   * 45 s (seen here: it hangs in Erlang's `global` after "Global hang workaround" in its log,
   * its peers listing it as running) is restarted, as an operator would, and the fact noted;
   * so are the nodes the most others still list in a partition then (RabbitMQ's advice:
   * restart the nodes of the partition you trust least). The restarts run at once, and the whole wait is
   * bounded (45 s, about 90 s of restarts, 90 s).
   */
  async #awaitHealed(notes: [string, string | number][]): Promise<void> {
    try {
      await this.cluster.awaitHealed(45_000)
      return
    } catch (error) {
      progress(
        `not whole 45 s after the heal: ${String(error).split('\n').slice(0, 4).join(' | ')}`,
      )
    }
    const nodes = this.cluster.nodes
    /** How many nodes list each node in a partition. */
    const listed = new Map<string, number>()
    const stuck = new Set<number>()
    await Promise.all(
      nodes.map(async (node, i) => {
        try {
          const status = JSON.parse(await node.ctl('cluster_status', '--formatter', 'json')) as {
            partitions: Record<string, string[]>
          }
          for (const peer of new Set(Object.values(status.partitions).flat())) {
            listed.set(peer, (listed.get(peer) ?? 0) + 1)
          }
        } catch {
          stuck.add(i)
        }
      }),
    )
    // The side fewest nodes trust: those listed by the most.
    const most = Math.max(0, ...listed.values())
    const restart = nodes.flatMap((node, i) =>
      stuck.has(i) || (most > 0 && listed.get(node.name) === most) ? [i] : [],
    )
    await Promise.all(
      restart.map(async (i) => {
        const why = stuck.has(i) ? 'stuck' : 'still listed in a partition'
        notes.push([`node ${i} ${why} 45 s after the heal`, 'restarted'])
        progress(`restarting node ${i} (${why})`)
        this.restarts++
        await this.cluster.restart(i)
      }),
    )
    await this.cluster.awaitHealed(90_000)
  }

  /**
   * Says where confirmed messages that were never handled are: the queues' counts as each node
   * lists its own (ready, unacknowledged), and the lost ids' rows in the idempotency table.
   */
  async #whereAreTheLost(
    queue: string,
    lost: readonly string[],
    clients: readonly [string, AceMq][],
  ): Promise<void> {
    progress(`${lost.length} confirmed messages never handled: ${lost.join(' ')}`)
    for (const [name, mq] of clients) {
      const { publish, consume } = (mq.transport as AmqpTransport).connectedNodes
      progress(`client ${name}: publish on ${publish ?? '-'}, consume on ${consume ?? '-'}`)
    }
    const names =
      '[begin [{client_properties, P}] = rabbit_reader:info(C, [client_properties]), ' +
      'case lists:keyfind(<<"connection_name">>, 1, P) of {_, _, N} -> N; false -> none end ' +
      'end || C <- rabbit_networking:local_connections()].'
    for (const [i, node] of this.cluster.nodes.entries()) {
      const connections = await node
        .ctl('eval', names)
        .catch((error: unknown) => String(error).split('\n')[0] ?? '')
      progress(`node ${i} connections: ${connections.replace(/\s+/g, ' ')}`)
      // The queue's consumers as this node lists them: channel, status, whether it is alive.
      const consumers = await node
        .ctl(
          'eval',
          '[{P, proplists:get_value(activity_status, C), ' +
            'catch rpc:call(node(P), erlang, is_process_alive, [P], 5000)} || ' +
            'C <- rabbit_amqqueue:consumers_all(<<"/">>), ' +
            'P <- [proplists:get_value(channel_pid, C)], ' +
            `element(4, proplists:get_value(queue_name, C)) =:= <<"${queue}">>].`,
        )
        .catch((error: unknown) => String(error).split('\n')[0] ?? '')
      progress(`node ${i} consumers (channel, status, alive): ${consumers.replace(/\s+/g, ' ')}`)
      const listing = await node
        .ctl(
          'list_queues',
          'name',
          'type',
          'messages_ready',
          'messages_unacknowledged',
          'consumers',
          '--local',
          '--quiet',
        )
        .catch((error: unknown) => String(error).split('\n')[0] ?? '')
      const mine = listing.split('\n').filter((line) => line.startsWith(queue))
      progress(`node ${i}: ${mine.join(' | ') || '(none of its queues)'}`)
    }
    const { rows } = await sql<{
      id: string
      owner: string
      confirmed: boolean
    }>`select id, owner, confirmed from ${sql.table(this.database.idempotencyTable)} where id in (${sql.join(lost)})`.execute(
      this.db,
    )
    progress(
      `their idempotency rows: ${rows.map((r) => `${r.id} ${r.owner} ${r.confirmed ? 'confirmed' : 'claimed'}`).join(', ') || 'none'}`,
    )
  }

  /**
   * Waits until every confirmed record of the scenario is handled (true), or for 90 s, or
   * until no side effect has come for 20 s (false).
   */
  async #awaitHandled(prefix: string, records: readonly PublishRecord[]): Promise<boolean> {
    const deadline = Date.now() + 90_000
    let seen = -1
    let lastProgress = Date.now()
    for (;;) {
      const missing = await this.#missing(prefix, records)
      if (missing === 0) return true
      if (missing !== seen) {
        seen = missing
        lastProgress = Date.now()
      }
      if (Date.now() > deadline || Date.now() - lastProgress > 20_000) return false
      await sleep(500)
    }
  }

  /** Confirmed records with no side effect yet. */
  async #missing(prefix: string, records: readonly PublishRecord[]): Promise<number> {
    const effects = await this.effects(prefix)
    return records.filter((r) => r.confirmed && !effects.has(r.id)).length
  }

  /**
   * Messages of `queue` its leader has out to consumers (unacknowledged) while none is ready.
   * Asked once no side effect has come for 20 s: the live consumers hold nothing that long,
   * so what is out is held for a consumer that is gone. (The leader's own consumer listing,
   * `rabbit_amqqueue:consumers_all`, does not show such a consumer; `list_queues` counts it.)
   */
  async #heldForTheGone(queue: string): Promise<number> {
    const leader = await this.cluster.leaderOf(queue).catch(() => undefined)
    const listing =
      (await leader
        ?.ctl(
          'list_queues',
          'name',
          'messages_ready',
          'messages_unacknowledged',
          '--local',
          '--quiet',
        )
        .catch(() => '')) ?? ''
    const row = listing
      .split('\n')
      .map((line) => line.trim().split(/\s+/))
      .find((cells) => cells[0] === queue)
    return row !== undefined && Number(row[1]) === 0 ? Number(row[2] ?? 0) : 0
  }

  /** Moves `queue`'s leadership to another node (its new leader monitors every consumer again). */
  async #moveLeadership(queue: string, notes: [string, string | number][]): Promise<void> {
    const leader = await this.cluster.leaderOf(queue)
    const target = this.cluster.nodes.find((node) => node !== leader) as NetnsNode
    const answer = await leader
      .ctl(
        'eval',
        `{ok, Q} = rabbit_amqqueue:lookup(rabbit_misc:r(<<"/">>, queue, <<"${queue}">>)), ` +
          `rabbit_quorum_queue:transfer_leadership(Q, '${target.name}').`,
      )
      .catch((error: unknown) => String(error).split('\n')[0] ?? '')
    notes.push(['leadership moved', `${leader.name} -> ${answer.trim()}`])
  }

  /** Nodes restarted because they were stuck after a heal. */
  restarts = 0

  async closeAll(): Promise<void> {
    await closeEach(this.#open)
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
