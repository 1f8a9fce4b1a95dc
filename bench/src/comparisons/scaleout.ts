import os from 'node:os'
import { ConsumerOptions } from '@acemq/core'
import { startRabbitCluster, type RabbitCluster } from '../../../test-support/rabbitmq-cluster.js'
import { renderChart } from '../curves/svg.js'
import { Admin } from '../internal/broker.js'
import { runInChild } from '../internal/child.js'
import { AMQP_URL } from '../internal/config.js'
import { awaitingHandler, drainAceMq, openAceMq } from '../internal/contestants.js'
import { scaleoutFindings, type ScalePoint } from '../internal/findings.js'
import {
  machineCores,
  machineCpuMs,
  pidListeningOn,
  portOf,
  totalCpuMs,
} from '../internal/proc-cpu.js'
import { collectGarbage } from '../internal/profiler.js'
import { row, type Row, type Section } from '../internal/results.js'
import { interleave } from '../internal/rounds.js'
import { median } from '../internal/stats.js'
import type { Comparison, RunContext, Worker } from './comparison.js'

// Issue 32: 1, 2 and 4 @acemq consumer processes on one queue — aggregate throughput, the
// consumers' CPU and the broker's — and a 3-node cluster with the work on a queue per node.

interface ConsumerParams {
  readonly url: string
  readonly warmupQueue: string
  readonly warmup: number
  readonly queue: string
  /** The consumer stops after this long without a delivery, once it has had one. */
  readonly idleMs: number
}

export interface ConsumerResult {
  readonly count: number
  readonly cpuMs: number
  /** `performance.timeOrigin + performance.now()` at go and at the last message, ms. */
  readonly goAt: number
  readonly lastAt: number
}

const now = (): number => performance.timeOrigin + performance.now()

/**
 * One consumer process: warms up on its own queue, says it is ready, waits for go, then consumes
 * the shared queue (prefetch 100, a handler that awaits) until it has been idle for `idleMs`.
 */
const consumeShare: Worker = async (params, { progress, go }) => {
  const p = params as ConsumerParams
  const mq = await openAceMq('scaleout', { url: p.url })
  try {
    const options = ConsumerOptions.defaults().withPrefetch(100)
    await drainAceMq(mq, p.warmupQueue, p.warmup, options, awaitingHandler)
    collectGarbage()
    progress('ready')
    await go()
    const goAt = now()
    const cpu = process.cpuUsage()
    let count = 0
    let lastAt = goAt
    const consumer = await mq.consume(p.queue, options, async () => {
      await Promise.resolve()
      count++
      lastAt = now()
    })
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, 50))
      if (count > 0 && now() - lastAt > p.idleMs) break
      if (count === 0 && now() - goAt > 30_000) break
    }
    const used = process.cpuUsage(cpu)
    progress('drained')
    await consumer.close()
    return {
      count,
      cpuMs: (used.user + used.system) / 1000,
      goAt,
      lastAt,
    } satisfies ConsumerResult
  } finally {
    await mq.close()
  }
}

/** A measured scale-out run: aggregate rate and cores busy (CPU time ÷ wall time). */
interface Run {
  readonly ms: number
  readonly rate: number
  readonly consumerCores: number
  readonly brokerCores: number
  /** The whole machine, every process (other people's work too). */
  readonly machineCores: number
}

/**
 * Fills the queues, starts one consumer process per entry of `plan` (the URL it connects to
 * and the queue it drains), tells them all to go at once, and measures the whole drain.
 */
async function runConsumers(
  admins: readonly Admin[],
  plan: readonly { readonly node: number; readonly queue: string }[],
  urls: readonly string[],
  queued: number,
  warmup: number,
  brokerPids: readonly (number | undefined)[],
): Promise<Run> {
  const warmQueues: [Admin, string][] = []
  try {
    for (const step of plan) {
      const admin = admins[step.node] as Admin
      const warm = await admin.queue('scaleout-warm')
      warmQueues.push([admin, warm])
      await admin.fill(warm, warmup)
    }
    // The broker's and the machine's CPU are read from go to the moment every consumer has
    // drained (its idle tail of 250 ms included), not over the processes' start and warm-up.
    type Reading = {
      at: number
      broker: number | undefined
      machine: ReturnType<typeof machineCpuMs>
    }
    const read = (): Reading => ({
      at: performance.now(),
      broker: totalCpuMs(brokerPids),
      machine: machineCpuMs(),
    })
    let start: Reading | undefined
    let end: Reading | undefined
    let ready = 0
    let drained = 0
    let go!: () => void
    const started = new Promise<void>((resolve) => (go = resolve))
    const children = plan.map((step, i) =>
      runInChild<ConsumerResult>(
        {
          worker: 'scaleout:consume',
          params: {
            url: urls[step.node] as string,
            warmupQueue: warmQueues[i]?.[1] as string,
            warmup,
            queue: step.queue,
            idleMs: 250,
          } satisfies ConsumerParams,
        },
        {
          go: started,
          onProgress: (data) => {
            if (data === 'ready' && ++ready === plan.length) {
              start = read()
              go()
            }
            if (data === 'drained' && ++drained === plan.length) end = read()
          },
        },
      ),
    )
    const result = await Promise.all(children)
    if (start === undefined || end === undefined) throw new Error('scale-out: no go or no end')
    const span = end.at - start.at
    const goAt = Math.min(...result.map((r) => r.goAt))
    const wall = Math.max(...result.map((r) => r.lastAt)) - goAt
    const count = result.reduce((n, r) => n + r.count, 0)
    if (count < queued) throw new Error(`scale-out: ${count} of ${queued} messages consumed`)
    return {
      ms: wall,
      rate: (count * 1000) / wall,
      consumerCores: result.reduce((n, r) => n + r.cpuMs, 0) / wall,
      brokerCores:
        start.broker === undefined || end.broker === undefined
          ? Number.NaN
          : (end.broker - start.broker) / span,
      machineCores: machineCores(start.machine, end.machine, span),
    }
  } finally {
    for (const [admin, warm] of warmQueues) await admin.remove(warm)
  }
}

const PROCESSES = [1, 2, 4] as const

/** A run's rows: aggregate rate, and the cores the consumers, the broker and the machine kept busy. */
function runRows(label: string, runs: readonly Run[]): Row[] {
  return [
    row(
      label,
      'msgs/s',
      runs.map((x) => x.rate),
    ),
    row(
      `${label}: consumers' cores`,
      'cores',
      runs.map((x) => x.consumerCores),
    ),
    row(
      `${label}: broker's cores`,
      'cores',
      runs.map((x) => x.brokerCores),
    ),
    row(
      `${label}: whole machine's cores`,
      'cores',
      runs.map((x) => x.machineCores),
    ),
  ]
}

function chartOf(context: RunContext, points: readonly ScalePoint[]): string {
  return renderChart({
    title: '@acemq consumer processes on one queue: aggregate throughput and CPU',
    xLabel: 'consumer processes',
    stamp: context.stamp(),
    panels: [
      {
        yLabel: 'msgs/s (all processes)',
        series: [{ name: 'throughput', points: points.map((p) => [p.consumers, p.rate]) }],
      },
      {
        yLabel: 'cores busy (CPU time ÷ wall time)',
        series: [
          { name: 'consumers', points: points.map((p) => [p.consumers, p.consumerCores]) },
          { name: 'broker', points: points.map((p) => [p.consumers, p.brokerCores]), dashed: true },
          {
            name: 'both',
            points: points.map((p) => [p.consumers, p.consumerCores + p.brokerCores]),
          },
        ],
      },
    ],
  })
}

function summarize(runs: Record<string, Run[]>, key: string, consumers: number): ScalePoint {
  const r = runs[key] as Run[]
  return {
    consumers,
    rate: median(r.map((x) => x.rate)),
    consumerCores: median(r.map((x) => x.consumerCores)),
    brokerCores: median(r.map((x) => x.brokerCores)),
    machineCores: median(r.map((x) => x.machineCores)),
  }
}

export const scaleout: Comparison = {
  id: 'scaleout',
  title: '10. Scale-out: consumer processes on one queue',
  workers: { 'scaleout:consume': consumeShare },

  async run(context) {
    const { admin, sizes, log } = context
    const brokerPid = pidListeningOn(portOf(AMQP_URL))
    const variants = PROCESSES.map((n) => `${n}`)
    const runs = await interleave({
      name: 'scaleout',
      variants,
      rounds: sizes.rounds,
      unit: 'ms',
      log,
      measure: async (variant) => {
        const queue = await admin.queue('scaleout')
        try {
          await admin.fill(queue, sizes.scaleout)
          const plan = Array.from({ length: Number(variant) }, () => ({ node: 0, queue }))
          return await runConsumers([admin], plan, [AMQP_URL], sizes.scaleout, sizes.warmup, [
            brokerPid,
          ])
        } finally {
          await admin.remove(queue)
        }
      },
      recover: context.recover,
    })
    const points = PROCESSES.map((n) => summarize(runs, `${n}`, n))
    context.writeChart('scaleout.svg', chartOf(context, points))
    const cpus = os.availableParallelism()
    const section: Section = {
      title: 'Aggregate throughput and CPU',
      setup: [
        `${sizes.scaleout.toLocaleString('en-US')} messages in one durable classic queue, drained by 1, 2 or 4 \`@acemq\` consumer processes at once (prefetch 100 each, concurrency 1, a handler that awaits), each warmed up on a queue of its own first and started together.`,
        "Throughput: every message ÷ the time from go to the last message in any process. Cores busy: CPU time ÷ wall time — the consumers summed (go to their last message), the broker (`beam.smp`, from `/proc`) and the whole machine (`/proc/stat`, other people's work included) from go until every consumer has drained (250 ms of idle tail included).",
        `Chart: [benchmarks/scaleout.svg](benchmarks/scaleout.svg), stamped with the commit and the load average of the run.`,
      ],
      rows: PROCESSES.flatMap((n) =>
        runRows(`${n} process${n > 1 ? 'es' : ''}`, runs[`${n}`] as Run[]),
      ),
      checks: [],
      notes: [],
      findings: [scaleoutFindings(points, cpus, 'Scale-out on one queue')],
    }
    return { id: 'scaleout', title: this.title, sections: [section], profiles: [] }
  },
}

/** Stops `cluster` on SIGINT/SIGTERM too (the node helper's own exit hook does the rest). */
function stopOnSignal(cluster: RabbitCluster): () => void {
  const handler = (signal: NodeJS.Signals): void => {
    void cluster.stop().finally(() => process.kill(process.pid, signal))
  }
  process.once('SIGINT', handler)
  process.once('SIGTERM', handler)
  return () => {
    process.off('SIGINT', handler)
    process.off('SIGTERM', handler)
  }
}

export const cluster: Comparison = {
  id: 'cluster',
  title: '11. Scale-out on a 3-node cluster: a queue per node',
  workers: {},

  async run(context) {
    const { sizes, log } = context
    const t0 = Date.now()
    log('  starting a 3-node cluster (test-support/rabbitmq-cluster.ts) …')
    let theCluster: RabbitCluster
    try {
      theCluster = await startRabbitCluster({ prefix: 'acemq-bench' })
    } catch (error) {
      // No rabbitmq-server here, or no right to run it: the other comparisons' results stand.
      const reason = error instanceof Error ? (error.message.split('\n')[0] ?? '') : String(error)
      log(`  ! the cluster did not start (${reason}); skipped`)
      const skipped: Section = {
        title: 'Not measured',
        setup: [],
        rows: [],
        checks: [],
        notes: [`The 3-node cluster did not start on this machine: ${reason}`],
      }
      return { id: 'cluster', title: this.title, sections: [skipped], profiles: [] }
    }
    const unhook = stopOnSignal(theCluster)
    const admins: Admin[] = []
    try {
      const boot = (Date.now() - t0) / 1000
      for (const url of theCluster.urls) admins.push(await Admin.open(url))
      const pids = theCluster.nodes.map((node) => node.pid())
      const perQueue = Math.round(sizes.scaleout / 3)
      const VARIANTS = ['one node', 'three nodes'] as const
      const single = [0, 0, 0]
      const spread = [0, 1, 2]
      const runs = await interleave({
        name: 'cluster',
        variants: VARIANTS,
        rounds: Math.min(sizes.rounds, 3),
        unit: 'ms',
        log,
        measure: async (variant) => {
          // Each queue is declared through the node it should live on (classic queues are
          // placed on the node the declaring client is connected to).
          const nodes = variant === 'one node' ? single : spread
          const queues: [Admin, string][] = []
          try {
            for (const node of nodes) {
              const admin = admins[node] as Admin
              const queue = await admin.queue('cluster-share')
              queues.push([admin, queue])
            }
            await Promise.all(queues.map(([admin, queue]) => admin.fill(queue, perQueue)))
            const plan = nodes.map((node, i) => ({ node, queue: queues[i]?.[1] as string }))
            return await runConsumers(
              admins,
              plan,
              theCluster.urls,
              perQueue * 3,
              sizes.warmup,
              pids,
            )
          } finally {
            for (const [admin, queue] of queues) await admin.remove(queue)
          }
        },
        recover: context.recover,
      })
      const points = VARIANTS.map((v, i) => summarize(runs, v, i === 0 ? 1 : 3))
      const cpus = os.availableParallelism()
      const [one, three] = points as [ScalePoint, ScalePoint]
      const section: Section = {
        title: 'Three consumer processes, three queues',
        setup: [
          `A cluster of 3 extra RabbitMQ nodes on this machine (\`startRabbitCluster\`, the helper the transport's cluster tests use; booted in ${boot.toFixed(0)} s, stopped and removed afterwards, also on an interrupt). ${perQueue.toLocaleString('en-US')} messages in each of 3 durable classic queues, 3 \`@acemq\` consumer processes (prefetch 100, an awaiting handler), each connected to the node of its queue.`,
          "`one node`: all three queues on the first node; `three nodes`: a queue on each node. Broker cores: the three nodes' Erlang VMs summed, from `/proc`.",
        ],
        rows: VARIANTS.flatMap((v) => runRows(v, runs[v] as Run[])),
        checks: [],
        notes: [],
        findings: [
          scaleoutFindings(
            [one, { ...three, consumers: 3 }],
            cpus,
            'Cluster, 3 consumer processes, their queues on 1 node against on 3 nodes',
            'nodes',
          ),
        ],
      }
      return { id: 'cluster', title: this.title, sections: [section], profiles: [] }
    } finally {
      for (const admin of admins) await admin.close().catch(() => undefined)
      await theCluster.stop()
      unhook()
      log(`  cluster stopped; ${((Date.now() - t0) / 1000).toFixed(0)} s with it`)
    }
  },
}
