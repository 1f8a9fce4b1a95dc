import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ConsumerOptions, PublishFailedError } from '@acemq/core'
import type { AceMq } from '@acemq/core'
import { KyselyIdempotencyStore } from '@acemq/store-kysely'
import { Kysely, PostgresDialect, sql } from 'kysely'
import pg from 'pg'
import { printAccounting } from '../../../e2e/test/accounting.js'
import { startRabbitCluster } from '../../../test-support/rabbitmq-cluster.js'
import type { RabbitCluster } from '../../../test-support/rabbitmq-cluster.js'
import type { RabbitNode } from '../../../test-support/rabbitmq-node.js'
import { DATABASE_URL, requirePostgres, requireRabbit, uniqueName } from '@acemq/testing'
import { AmqpTransport, connect } from '../src/index.js'
import type { AmqpTransportOptions } from '../src/index.js'
import { publishUntilConfirmed, tally } from './support/counting.js'
import { eventually } from './support/harness.js'

const hasRabbit = await requireRabbit()
const hasPostgres = await requirePostgres()

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** Fast recovery, so the figures measure the cluster rather than a long backoff. */
const RECOVERY = { initialDelay: 100, maxDelay: 1_000 } as const

/** The port in a node's description (`amqp://guest:***@127.0.0.1:40587`). */
function portOf(description: string | undefined): number | undefined {
  const port = /:(\d+)$/.exec(description ?? '')?.[1]
  return port === undefined ? undefined : Number(port)
}

/**
 * Three extra RabbitMQ nodes on this machine, clustered, beside the main broker (which is never
 * touched): each scenario kills one node with `kill -9` of its Erlang VM, as a crashed machine
 * would, and starts it again afterwards.
 */
describe.runIf(hasRabbit && hasPostgres)('AmqpTransport on a three-node RabbitMQ cluster', () => {
  let cluster: RabbitCluster | undefined
  const transports: AmqpTransport[] = []
  const connections: AceMq[] = []

  const open = async (
    urls: readonly string[],
    options: AmqpTransportOptions = {},
  ): Promise<AmqpTransport> => {
    const transport = new AmqpTransport(urls, {
      recovery: RECOVERY,
      logger: { warn: () => undefined },
      ...options,
    })
    transports.push(transport)
    await transport.connect()
    return transport
  }

  /** A quorum queue, declared through a connection to `on` (its leader, RabbitMQ's default). */
  const quorumQueue = async (prefix: string, on: RabbitNode): Promise<string> => {
    const queue = uniqueName(prefix)
    const transport = await open([on.url])
    await transport.declare([
      { kind: 'queue', name: queue, type: 'quorum', durable: true, arguments: {} },
    ])
    await transport.close()
    return queue
  }

  beforeAll(async () => {
    const started = performance.now()
    cluster = await startRabbitCluster({ prefix: 'acemq-cluster' })
    console.info(`three clustered nodes in ${((performance.now() - started) / 1_000).toFixed(1)} s`)
  }, 180_000)

  afterAll(async () => {
    await Promise.all(connections.map((mq) => mq.close({ drainTimeout: 0 })))
    await Promise.all(transports.map((transport) => transport.close()))
    await cluster?.stop()
  }, 60_000)

  it('consumes every confirmed message of 20,000 published while the publisher’s node is killed', async () => {
    const nodes = (cluster as RabbitCluster).nodes
    const publisher = await open((cluster as RabbitCluster).urls, {
      connectionName: 'acemq-cluster-publisher',
    })
    const victim = (cluster as RabbitCluster).nodeAt(publisher.connectedNodes.publish ?? '')
    // The queue's leader on another node: this scenario is about the publisher's node.
    const queue = await quorumQueue(
      'cluster.publish',
      nodes.find((n) => n !== victim) as RabbitNode,
    )
    const ids = Array.from({ length: 20_000 }, (_, i) => `p-${i}`)
    let killedAt = 0
    let killing: Promise<void> | undefined
    let reconnectedAt = 0
    let firstConfirmAfterReconnect = 0
    publisher.onEvent((event) => {
      if (event.type === 'reconnected' && reconnectedAt === 0) reconnectedAt = performance.now()
    })
    const started = performance.now()
    const { confirmed, republished, refused } = await publishUntilConfirmed(
      publisher,
      queue,
      ids,
      500,
      (count) => {
        if (count === 5_000) {
          killedAt = performance.now()
          killing = victim.kill()
        } else if (reconnectedAt > 0 && firstConfirmAfterReconnect === 0) {
          firstConfirmAfterReconnect = performance.now()
        }
      },
    )
    const publishSeconds = (performance.now() - started) / 1_000
    await killing
    const movedTo = publisher.connectedNodes.publish
    expect(portOf(movedTo)).not.toBe(victim.amqpPort)
    expect(publisher.description).toContain(`publish on ${movedTo}`)

    const restarting = victim.start()
    const consumer = await open(
      (cluster as RabbitCluster).nodes.filter((n) => n !== victim).map((n) => n.url),
    )
    const consumed = tally()
    await consumer.consume(queue, { prefetch: 1_000 }, (delivery) => consumed.onDelivery(delivery))
    await eventually(
      () => consumed.counts.size >= confirmed.size,
      120_000,
      'every confirmed message consumed',
    )
    await sleep(1_000)
    await restarting
    await (cluster as RabbitCluster).awaitAllRunning()
    const lost = [...confirmed].filter((id) => !consumed.counts.has(id)).length
    const duplicates = consumed.deliveries - consumed.counts.size
    printAccounting('publishing 20,000 while the publisher’s node is killed (kill -9)', [
      ['messages published', ids.length],
      ['confirmed', confirmed.size],
      ['in flight when the node died, sent again', republished],
      ['refused while recovering, sent again', refused],
      ['consumed (distinct)', consumed.counts.size],
      ['lost', lost],
      ['duplicates (copies of those sent again)', duplicates],
      [
        'seconds from kill -9 to confirms on another node',
        ((firstConfirmAfterReconnect - killedAt) / 1_000).toFixed(2),
      ],
      ['seconds to publish all', publishSeconds.toFixed(1)],
    ])
    expect(confirmed.size).toBe(ids.length)
    expect(lost).toBe(0)
    expect(duplicates).toBeLessThanOrEqual(republished)
    expect(republished).toBeGreaterThan(0)
  }, 180_000)

  it('handles every message exactly once with a Postgres store while the queue leader’s node is killed and started again, and the consumer resumes on another node', async () => {
    const theCluster = cluster as RabbitCluster
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 8 })
    const db = new Kysely<Record<string, never>>({ dialect: new PostgresDialect({ pool }) })
    const table = uniqueName('acemq_cluster_claims').replace('.', '_')
    const effects = uniqueName('acemq_cluster_effects').replace('.', '_')
    const store = new KyselyIdempotencyStore(db, { table })
    try {
      await sql.raw(store.createTableSql()).execute(db)
      await sql`create table ${sql.table(effects)} (message_id text not null)`.execute(db)

      const [first] = theCluster.nodes
      const queue = await quorumQueue('cluster.idempotent', first as RabbitNode)
      const leader = await theCluster.leaderOf(queue)
      const others = theCluster.nodes.filter((node) => node !== leader)

      const producer = await connect(
        others.map((node) => node.url),
        { connectionName: 'acemq-cluster-producer', recovery: RECOVERY },
      )
      connections.push(producer)
      const total = 4_000
      const sender = producer.publisher<{ n: number }>('', queue)
      for (let from = 0; from < total; from += 500) {
        await Promise.all(
          Array.from({ length: 500 }, async (_, i) => {
            for (;;) {
              try {
                await sender.send({ n: from + i }, { id: `m-${from + i}` })
                return
              } catch (error) {
                if (!(error instanceof PublishFailedError)) throw error
                await sleep(50)
              }
            }
          }),
        )
      }

      // The consumer's connections start on the leader's node: killing it takes both away.
      const mq = await connect([leader.url, ...others.map((node) => node.url)], {
        connectionName: 'acemq-cluster-consumer',
        nodeOrder: 'in-order',
        recovery: RECOVERY,
        logger: { warn: () => undefined },
      })
      connections.push(mq)
      const transport = mq.transport as AmqpTransport
      expect(portOf(transport.connectedNodes.consume)).toBe(leader.amqpPort)

      const runs = new Map<string, number>()
      const starts: number[] = []
      await mq.consume<{ n: number }>(
        queue,
        ConsumerOptions.defaults()
          .idempotent(store)
          .withPrefetch(50)
          .withConcurrency(8)
          .withInProgressDelay(200),
        async (message) => {
          starts.push(performance.now())
          const id = message.envelope.id
          runs.set(id, (runs.get(id) ?? 0) + 1)
          await sql`insert into ${sql.table(effects)} (message_id) values (${id})`.execute(db)
        },
      )
      await eventually(() => runs.size >= 1_000, 60_000, '1,000 messages handled')
      const killedAt = performance.now()
      await leader.kill()
      const deadAt = performance.now()
      await eventually(
        () => starts.some((at) => at > deadAt) && transport.connectedNodes.consume !== undefined,
        60_000,
        'a handler run on another node',
      )
      const resumedAt = starts.find((at) => at > deadAt) ?? 0
      const resumedOn = transport.connectedNodes.consume
      expect(portOf(resumedOn)).not.toBe(leader.amqpPort)
      expect(transport.description).toContain(`consume on ${resumedOn}`)
      const newLeader = await theCluster.leaderOf(queue)

      const restartedFrom = performance.now()
      await leader.start()
      const restartSeconds = (performance.now() - restartedFrom) / 1_000
      await theCluster.awaitAllRunning()

      const counted = async (): Promise<{ rows: number; distinct: number }> => {
        const { rows } = await sql<{ all_rows: string; distinct_ids: string }>`
          select count(*) as all_rows, count(distinct message_id) as distinct_ids
          from ${sql.table(effects)}`.execute(db)
        return { rows: Number(rows[0]?.all_rows), distinct: Number(rows[0]?.distinct_ids) }
      }
      await eventually(
        async () => (await counted()).distinct === total,
        120_000,
        'every message handled',
      )
      await sleep(2_000) // a copy handled twice would show by now
      const { rows, distinct } = await counted()
      const twice = [...runs.values()].filter((count) => count > 1).length
      const resumeSeconds = (resumedAt - killedAt) / 1_000
      printAccounting('an idempotent consumer while the quorum leader’s node is killed', [
        ['messages', total],
        ['handled (distinct)', distinct],
        ['lost', total - distinct],
        ['handled twice (rows, runs)', `${rows - distinct}, ${twice}`],
        ['seconds from kill -9 to a handler on another node', resumeSeconds.toFixed(2)],
        ['consumer moved from → to (port)', `${leader.amqpPort} → ${portOf(resumedOn)}`],
        ['new leader', newLeader.name],
        ['seconds to start the killed node again', restartSeconds.toFixed(1)],
      ])
      expect(distinct).toBe(total)
      expect(rows).toBe(total)
      expect(twice).toBe(0)
      // Recovery backoff (100 ms doubling to 1 s) plus the quorum queue's new leader election.
      expect(resumeSeconds).toBeLessThan(30)
    } finally {
      await Promise.all(connections.splice(0).map((mq) => mq.close({ drainTimeout: 0 })))
      await sql`drop table if exists ${sql.table(effects)}`.execute(db)
      await sql`drop table if exists ${sql.table(table)}`.execute(db)
      await db.destroy()
    }
  }, 240_000)
})
