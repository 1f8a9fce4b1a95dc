import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { AmqpTransport } from '@acemq/transport-amqp'
import { requirePostgres } from '@acemq/testing'
import {
  requireNamespaces,
  startNetnsCluster,
  type NetnsCluster,
} from '../../test-support/netns-cluster.js'
import { accepts } from '../../test-support/rabbitmq-node.js'
import { printAccounting } from './accounting.js'
import { checkRows } from './delivery-check.js'
import { PartitionWorld, sleep, type Scenario, type ScenarioResult } from './partition-world.js'

const ready = (await requireNamespaces()) && (await requirePostgres())

/** How long the flapping scenario flaps (`ACEMQ_PARTITION_FLAP_SECONDS`, 60). */
const FLAP_MS = Number(process.env['ACEMQ_PARTITION_FLAP_SECONDS'] ?? '60') * 1_000

async function until(condition: () => Promise<boolean>, timeoutMs: number): Promise<number> {
  const from = Date.now()
  while (!(await condition())) {
    if (Date.now() - from > timeoutMs) throw new Error(`not within ${timeoutMs} ms`)
    await sleep(200)
  }
  return Date.now() - from
}

/** The leader on node 0, a slow consumer on node 2 (the one cut off) and another on node 1. */
const SLOW_CONSUMER_ON_NODE_2 = {
  leader: 0,
  publisherNodes: [0, 1, 2],
  consumerNodes: [
    [2, 0, 1],
    [1, 0, 2],
  ],
  handlerMs: 200,
} as const

const seconds = (ms: number): string => (ms / 1_000).toFixed(1)
const random = (from: number, to: number): number => from + Math.random() * (to - from)

/**
 * Three RabbitMQ nodes in network namespaces of their own (test-support/netns-cluster.ts,
 * `pause_minority`), partitioned by taking links down while a publisher (confirms, sending
 * again what fails) and idempotent consumers on the Postgres store, connected to different
 * nodes, run. After each heal the checker reads every side effect: 0 confirmed messages lost,
 * 0 duplicate side effects, failed publishes handled at most once.
 */
describe.runIf(ready)('partitions on a three-node cluster in network namespaces', () => {
  let cluster: NetnsCluster
  let world: PartitionWorld
  const fileStarted = Date.now()
  const results = new Map<string, ScenarioResult>()

  beforeAll(async () => {
    const started = Date.now()
    cluster = await startNetnsCluster()
    world = await PartitionWorld.create(cluster)
    console.info(`three nodes in namespaces, clustered, in ${seconds(Date.now() - started)} s`)
  }, 180_000)

  afterAll(async () => {
    await world?.destroy()
    await cluster?.stop()
    console.info(`partition tests: ${seconds(Date.now() - fileStarted)} s in all`)
  }, 120_000)

  const node = (i: number) => cluster.nodes[i] as NetnsCluster['nodes'][number]
  const paused = async (i: number): Promise<boolean> =>
    !(await accepts(5672, node(i).clientAddress))

  async function run(scenario: Scenario): Promise<ScenarioResult> {
    const result = await world.run(scenario)
    results.set(scenario.title, result)
    expect(result.check.lost).toEqual([])
    expect(result.check.duplicated).toEqual([])
    expect(result.check.unknown).toEqual([])
    expect(result.check.confirmed).toBeGreaterThan(500)
    // docs/design.md §9: DOWN only when closed; DEGRADED while recovering; UP once back.
    for (const [name, seen] of result.health) {
      expect(seen.errors, name).toBe(0)
      expect(seen.statuses.has('DOWN'), name).toBe(false)
      for (const reason of seen.degraded) {
        expect(reason, name).toMatch(/^connection:.*recovering|^consumers:.*unsubscribed/)
      }
    }
    for (const [name, status] of result.finalHealth) expect(status, name).toBe('UP')
    return result
  }

  it('the quorum leader’s node cut from both peers (minority leader) pauses, the majority elects a leader, nothing is lost after the heal', async () => {
    await run({
      name: 'minority-leader',
      title: 'the leader cut from its peers, then healed',
      leader: 0,
      publisherNodes: [0, 1, 2],
      consumerNodes: [
        [0, 1, 2],
        [1, 2, 0],
      ],
      async disrupt(context) {
        context.cutAt = Date.now()
        await cluster.cutFromPeers(0)
        // pause_minority: alone, node 0 stops its listeners and closes its clients' connections.
        const pausedMs = await until(() => paused(0), 45_000)
        context.notes.push(['seconds until the minority node paused', seconds(pausedMs)])
        // Asked of each node in turn (the paused one cannot say): the majority elected one.
        const leader = await cluster.leaderOf(context.queue).catch(() => undefined)
        context.notes.push(['leader during the partition', leader?.name ?? 'none answered'])
        expect(leader?.name).not.toBe(node(0).name)
        await sleep(5_000)
        await cluster.heal(0)
      },
    })
  }, 240_000)

  it('one follower cut off from everything: its clients move to the majority, the queue goes on', async () => {
    await run({
      name: 'follower',
      title: 'a follower cut off, then healed',
      leader: 0,
      publisherNodes: [2, 0, 1],
      consumerNodes: [
        [2, 0, 1],
        [1, 0, 2],
      ],
      async disrupt(context) {
        context.cutAt = Date.now()
        await cluster.isolate(2)
        const movedMs = await until(async () => {
          const on = (context.publisher.transport as AmqpTransport).connectedNodes.publish
          return on !== undefined && !on.includes(node(2).clientAddress)
        }, 30_000)
        context.notes.push(['seconds until the publisher was on another node', seconds(movedMs)])
        await sleep(5_000)
        await cluster.heal(2)
      },
    })
  }, 240_000)

  it('a client cut from its node only (the node stays in the cluster): the client moves, its unacked deliveries go to the other consumer', async () => {
    await run({
      name: 'client-cut',
      title: 'clients cut from their node only',
      leader: 0,
      publisherNodes: [1, 0, 2],
      consumerNodes: [
        [1, 0, 2],
        [0, 1, 2],
      ],
      async disrupt(context) {
        context.cutAt = Date.now()
        await cluster.cutFromClients(1)
        await sleep(10_000)
        // The node never left the cluster: its peers still see it running.
        const status = JSON.parse(await node(0).ctl('cluster_status', '--formatter', 'json')) as {
          running_nodes: string[]
          partitions: Record<string, string[]>
        }
        expect(status.running_nodes).toContain(node(1).name)
        expect(status.partitions).toEqual({})
        await cluster.heal(1)
      },
    })
  }, 240_000)

  it(
    `partitions that come and go every few seconds for ${FLAP_MS / 1_000} s`,
    async () => {
      await run({
        name: 'flapping',
        title: `partitions flapping for ${FLAP_MS / 1_000} s`,
        leader: 0,
        publisherNodes: [0, 1, 2],
        consumerNodes: [
          [1, 2, 0],
          [2, 0, 1],
        ],
        async disrupt(context) {
          context.cutAt = Date.now()
          const kinds = ['cutFromPeers', 'cutFromClients', 'isolate'] as const
          const counts = new Map<string, number>()
          while (Date.now() - context.cutAt < FLAP_MS) {
            const victim = Math.floor(Math.random() * 3)
            const kind = kinds[Math.floor(Math.random() * kinds.length)] as (typeof kinds)[number]
            counts.set(kind, (counts.get(kind) ?? 0) + 1)
            await cluster[kind](victim)
            await sleep(random(2_000, 6_000))
            await cluster.heal(victim)
            await sleep(random(1_000, 3_000))
          }
          for (const [kind, n] of counts) context.notes.push([`partitions: ${kind}`, n])
        },
      })
    },
    FLAP_MS + 240_000,
  )

  it('a partition during a graceful close: the close finishes in its bounds, what it left is handled once elsewhere', async () => {
    await run({
      name: 'close',
      title: 'a partition during a graceful close',
      ...SLOW_CONSUMER_ON_NODE_2,
      closed: ['close-c0'],
      async disrupt(context) {
        const closing = context.consumers[0]?.mq.close({ drainTimeout: '3s' })
        context.cutAt = Date.now()
        await cluster.isolate(2)
        await closing
        const closeMs = Date.now() - context.cutAt
        context.notes.push(['seconds the close took', seconds(closeMs)])
        // docs/design.md §8: the drain (3 s), 5 s more for running handlers, a small margin.
        expect(closeMs).toBeLessThan(3_000 + 5_000 + 5_000)
        await sleep(3_000)
        await cluster.heal(2)
      },
    })
  }, 240_000)

  it('a partition during a drain: the drain answers in time, consuming resumes after the heal', async () => {
    await run({
      name: 'drain',
      title: 'a partition during a drain',
      ...SLOW_CONSUMER_ON_NODE_2,
      async disrupt(context) {
        const consumer = context.consumers[0]?.mq
        const draining = consumer?.drainConsumers('3s')
        context.cutAt = Date.now()
        await cluster.isolate(2)
        const drained = await draining
        const drainMs = Date.now() - context.cutAt
        context.notes.push(['drain answered (s)', `${String(drained)} in ${seconds(drainMs)}`])
        expect(drainMs).toBeLessThan(3_000 + 2_000)
        await sleep(5_000)
        await cluster.heal(2)
        consumer?.resumeConsuming()
      },
    })
  }, 240_000)

  it('the whole run: every confirmed publish handled, every side effect once', async () => {
    const check = await world.wholeRun()
    printAccounting(`partitions: the whole run (${results.size} scenarios)`, [
      ...checkRows(check),
      ['nodes restarted, stuck after a heal', world.restarts],
      ...[...results].map(
        ([title, r]) =>
          [
            `${title}: stall / resume (s)`,
            `${seconds(r.longestStallMs)} / ${seconds(r.resumeMs)}`,
          ] as [string, string],
      ),
    ])
    expect(results.size).toBe(6)
    expect(check.lost).toEqual([])
    expect(check.duplicated).toEqual([])
    expect(check.unknown).toEqual([])
  }, 60_000)
})
