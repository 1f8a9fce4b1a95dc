import fs from 'node:fs'
import inspector from 'node:inspector'
import { findSourceMap } from 'node:module'
import { totalCpuMs } from './proc-cpu.js'

export interface Frame {
  url: string
  lineNumber: number
  columnNumber: number
}

/**
 * Points a profile frame at the TypeScript source in place (tsx runs compiled code; the child
 * runs with `--enable-source-maps` when it profiles, which keeps tsx's inline maps). Returns the
 * source's URL, or the frame's own when it has no map.
 */
export function mapFrameToSource(callFrame: Frame): string {
  if (!callFrame.url.startsWith('file://') || callFrame.lineNumber < 0) return callFrame.url
  const entry = findSourceMap(callFrame.url)?.findEntry(
    callFrame.lineNumber,
    callFrame.columnNumber,
  )
  if (entry === undefined || !('originalLine' in entry)) return callFrame.url
  callFrame.lineNumber = entry.originalLine
  callFrame.columnNumber = entry.originalColumn
  return entry.originalSource
}

/** Points every frame of a CPU profile at the TypeScript sources ({@link mapFrameToSource}). */
function mapToSources(profile: { nodes?: { callFrame: Frame }[] }): void {
  for (const { callFrame } of profile.nodes ?? []) mapFrameToSource(callFrame)
}

/** Sends one command on an inspector session. */
export function post<T>(session: inspector.Session, method: string, params?: object): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    session.post(method, params ?? {}, (error, result) => {
      if (error) reject(error)
      else resolve(result as T)
    })
  })
}

/**
 * Runs `fn` under V8's sampling CPU profiler (the one behind `node --cpu-prof`) and writes the
 * `.cpuprofile` to `path`; with no path it just runs `fn`. Only the measured part is sampled,
 * so start-up, connecting and warm-up do not crowd the profile.
 */
export async function profiled<T>(path: string | undefined, fn: () => Promise<T>): Promise<T> {
  if (path === undefined) return fn()
  const session = new inspector.Session()
  session.connect()
  await post(session, 'Profiler.enable')
  await post(session, 'Profiler.setSamplingInterval', { interval: 100 })
  await post(session, 'Profiler.start')
  try {
    return await fn()
  } finally {
    const { profile } = await post<{ profile: { nodes?: { callFrame: Frame }[] } }>(
      session,
      'Profiler.stop',
    )
    mapToSources(profile)
    fs.writeFileSync(path, JSON.stringify(profile))
    session.disconnect()
  }
}

/** A measured run: wall time as the contestant reports it, and this process's CPU time meanwhile. */
export interface Measured {
  readonly ms: number
  /** User + system CPU of the contestant's process over the measured part. */
  readonly cpuMs: number
  /** CPU of the watched broker processes over the same stretch ({@link watchBroker}), ms. */
  readonly brokerCpuMs?: number
}

let brokerPids: readonly number[] = []

/** Also reports the CPU of these processes (the broker's Erlang VMs) in {@link measured}. */
export function watchBroker(pids: readonly number[]): void {
  brokerPids = pids
}

/** CPU time so far of the processes {@link watchBroker} named, ms; undefined without them. */
export function brokerCpu(): number | undefined {
  return totalCpuMs(brokerPids)
}

/**
 * Runs `fn` (which returns the wall time it measured) and adds the process's CPU time over the
 * same stretch: on a shared machine, CPU per message moves much less with other people's load
 * than wall time does. Profiles it when `path` is given.
 */
export async function measured(
  path: string | undefined,
  fn: () => Promise<number>,
): Promise<Measured> {
  const broker = brokerCpu()
  const before = process.cpuUsage()
  const ms = await profiled(path, fn)
  const { user, system } = process.cpuUsage(before)
  const brokerAfter = brokerCpu()
  return {
    ms,
    cpuMs: (user + system) / 1000,
    ...(broker !== undefined && brokerAfter !== undefined && { brokerCpuMs: brokerAfter - broker }),
  }
}

/** Collects garbage when `--expose-gc` is on (children always have it), twice to reach old space. */
export function collectGarbage(): void {
  globalThis.gc?.()
  globalThis.gc?.()
}
