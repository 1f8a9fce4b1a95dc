import fs from 'node:fs'
import { execFileSync } from 'node:child_process'

// Another process's CPU time, read from /proc: what the broker (RabbitMQ's Erlang VM, beam.smp)
// spends while a contestant runs. Linux only; elsewhere the figures are left out.

let ticksPerSecond: number | undefined

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim())
    } catch {
      ticksPerSecond = 100
    }
    if (!Number.isFinite(ticksPerSecond) || ticksPerSecond <= 0) ticksPerSecond = 100
  }
  return ticksPerSecond
}

/** User + system CPU time of process `pid` so far, in ms; undefined when it cannot be read. */
export function cpuMsOf(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the command name (which may hold spaces) start after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const utime = Number(fields[11])
    const stime = Number(fields[12])
    return ((utime + stime) * 1000) / clockTicks()
  } catch {
    return undefined
  }
}

/** The inode of the socket listening on TCP `port` (IPv4 or IPv6), from /proc/net. */
function listeningInode(port: number): string | undefined {
  const hex = port.toString(16).toUpperCase().padStart(4, '0')
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string
    try {
      text = fs.readFileSync(file, 'utf8')
    } catch {
      continue
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/)
      // local_address is cols[1] ("0100007F:1628"), st is cols[3] ("0A" = LISTEN), inode cols[9].
      if (cols[1]?.endsWith(`:${hex}`) === true && cols[3] === '0A') return cols[9]
    }
  }
  return undefined
}

/**
 * The pid of the process listening on TCP `port` (the broker: 5672 by default), looked up
 * through /proc; undefined when not found (another OS, or the broker runs in a container).
 */
export function pidListeningOn(port: number): number | undefined {
  const inode = listeningInode(port)
  if (inode === undefined) return undefined
  const target = `socket:[${inode}]`
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (!fs.readFileSync(`/proc/${entry}/comm`, 'utf8').startsWith('beam')) continue
      for (const fd of fs.readdirSync(`/proc/${entry}/fd`)) {
        if (fs.readlinkSync(`/proc/${entry}/fd/${fd}`) === target) return Number(entry)
      }
    } catch {
      // Gone, or not ours to read.
    }
  }
  return undefined
}

/** The AMQP port of `url` (5672 when it names none). */
export function portOf(url: string): number {
  const match = /:(\d+)(?:[/?]|$)/.exec(url.replace(/^amqps?:\/\/[^@]*@/, 'x://'))
  return match === null ? 5672 : Number(match[1])
}

/** CPU time of `pids` so far, summed, ms; undefined when one cannot be read (or none given). */
export function totalCpuMs(pids: readonly (number | undefined)[]): number | undefined {
  if (pids.length === 0) return undefined
  let total = 0
  for (const pid of pids) {
    const ms = cpuMsOf(pid)
    if (ms === undefined) return undefined
    total += ms
  }
  return total
}

/** The whole machine's CPU time so far, from /proc/stat: busy (not idle nor iowait) and all, ms. */
export function machineCpuMs(): { busy: number; all: number } | undefined {
  try {
    const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? ''
    const ticks = line.trim().split(/\s+/).slice(1, 9).map(Number)
    const all = ticks.reduce((sum, t) => sum + t, 0)
    const idle = (ticks[3] ?? 0) + (ticks[4] ?? 0)
    const ms = 1000 / clockTicks()
    return { busy: (all - idle) * ms, all: all * ms }
  } catch {
    return undefined
  }
}

/** Cores the whole machine kept busy between two {@link machineCpuMs} readings over `wallMs`. */
export function machineCores(
  before: { busy: number } | undefined,
  after: { busy: number } | undefined,
  wallMs: number,
): number {
  return before === undefined || after === undefined
    ? Number.NaN
    : (after.busy - before.busy) / wallMs
}
