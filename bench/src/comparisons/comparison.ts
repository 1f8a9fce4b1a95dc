import path from 'node:path'
import type { Admin } from '../internal/broker.js'
import type { ComparisonId, Sizes } from '../internal/config.js'
import { withBrokerLock } from '../internal/broker-lock.js'
import { summarizeProfile } from '../internal/profile-summary.js'
import type { ComparisonResult, ProfileResult } from '../internal/results.js'

/** What a worker gets besides its parameters. */
export interface WorkerContext {
  /** Where to write a CPU profile of the measured part, when one was asked for. */
  readonly profile: string | undefined
  /** Tells the parent something before the result (e.g. "subscribed, start publishing"). */
  progress(data: unknown): void
  /** Resolves when the parent says go (`runInChild`'s `go` option): to start several at once. */
  go(): Promise<void>
}

/** Runs in a child process; its result goes back to the parent as JSON. */
export type Worker = (params: unknown, context: WorkerContext) => Promise<unknown>

/** What the parent gives a comparison. */
export interface RunContext {
  readonly admin: Admin
  readonly sizes: Sizes
  readonly log: (line: string) => void
  /** Directory for `.cpuprofile` files. */
  readonly profileDir: string
  /** Profile the `@acemq` side even when every target is met. */
  readonly forceProfile: boolean
  /** Profile the `@acemq` side when a target is missed (not in a quick run). */
  readonly profileOnMiss: boolean
  /** After a failed measurement: waits for the broker to be back. */
  recover(error: unknown): Promise<void>
  /**
   * The commit, the time and the load average now and at the start of the run, written on every
   * chart (`Chart.stamp`).
   */
  stamp(): string
  /**
   * Writes a chart: to `benchmarks/<file>` in an official run, beside the results file
   * (`results/<tag>-<file>`) in a quick or tagged one.
   */
  writeChart(file: string, svg: string): void
}

/** One comparison of the issue: its workers (child side) and its orchestration (parent side). */
export interface Comparison {
  readonly id: ComparisonId
  readonly title: string
  readonly workers: Readonly<Record<string, Worker>>
  run(context: RunContext): Promise<Omit<ComparisonResult, 'seconds'>>
}

/** Creates a queue, fills it with `count` messages, runs `fn`, deletes it. */
export async function withFilledQueue<T>(
  admin: Admin,
  what: string,
  count: number,
  fn: (queue: string) => Promise<T>,
): Promise<T> {
  const queue = await admin.queue(what)
  try {
    await admin.fill(queue, count)
    return await fn(queue)
  } finally {
    await admin.remove(queue)
  }
}

/** A warm-up queue and a measured queue, filled (both at once), for the time of `fn`. */
export async function withWarmupAndMain<T>(
  admin: Admin,
  what: string,
  warmup: number,
  count: number,
  fn: (warmupQueue: string, queue: string) => Promise<T>,
): Promise<T> {
  const warmupQueue = await admin.queue(`${what}-warm`)
  try {
    const queue = await admin.queue(`${what}-main`)
    try {
      await Promise.all([admin.fill(warmupQueue, warmup), admin.fill(queue, count)])
      return await fn(warmupQueue, queue)
    } finally {
      await admin.remove(queue)
    }
  } finally {
    await admin.remove(warmupQueue)
  }
}

/** Whether to profile the `@acemq` side of a comparison, given whether its targets were met. */
export function shouldProfile(context: RunContext, met: boolean): boolean {
  return context.forceProfile || (!met && context.profileOnMiss)
}

/**
 * Runs `measure` once more with a CPU profile written to `<profileDir>/<name>.cpuprofile`
 * (holding the broker-fault lock, like the rounds) and summarizes it.
 */
export async function profileRun(
  context: RunContext,
  name: string,
  label: string,
  messages: number,
  measure: (file: string) => Promise<unknown>,
): Promise<ProfileResult> {
  context.log(`  profiling: ${label} …`)
  const file = path.join(context.profileDir, `${name}.cpuprofile`)
  await withBrokerLock(() => measure(file), context.log)
  return { label, messages, summary: summarizeProfile(file) }
}
