import { AsyncLocalStorage, AsyncResource } from 'node:async_hooks'
import { vi } from 'vitest'

/** The slice of @sinonjs/fake-timers' clock the simulation drives (vitest installs it). */
interface FakeClock {
  now: number
  nextAsync(): Promise<number>
  countTimers(): number
  timers?: Record<
    string,
    { readonly callAt: number; readonly func: unknown; readonly delay?: number }
  >
}

/** The real setImmediate, taken before any fake timers are installed. */
const realSetImmediate = globalThis.setImmediate

/** Where every schedule starts: a fixed epoch, so dates in headers are the same on every run. */
export const EPOCH = Date.UTC(2030, 0, 1)

// Every AceMq enables an AsyncLocalStorage and never disables it (sim-findings.md, finding 1):
// on Node 20 each one left enabled costs every later promise in the process. Until close()
// disables it, the simulation does, after each schedule.
const storages = new Set<AsyncLocalStorage<unknown>>()
const originalRun = AsyncLocalStorage.prototype.run
AsyncLocalStorage.prototype.run = function run(
  this: AsyncLocalStorage<unknown>,
  ...args: Parameters<typeof originalRun>
) {
  storages.add(this)
  return originalRun.apply(this, args) as never
}

/**
 * A virtual clock: vitest's fake timers (setTimeout, setInterval, setImmediate and Date), driven
 * one timer at a time with every promise job run in between, so a schedule replays exactly.
 * Timers the harness starts itself (handlers sleeping, scheduled events, a store answering
 * late) are counted apart from the engine's and the transport's, so "no timer left after close"
 * can be judged.
 */
export class VirtualClock {
  readonly #clock: FakeClock
  readonly #harness = new Set<ReturnType<typeof setTimeout>>()
  readonly #random: () => number
  readonly #originalRandom = Math.random
  readonly #fakes = new Map<string, unknown>()
  #steps = 0

  private constructor(clock: FakeClock, seed: number) {
    this.#clock = clock
    this.#random = mulberry32(seed)
  }

  /** Installs fake timers at {@link EPOCH} and a seeded Math.random (the retry jitter's). */
  static install(seed: number): VirtualClock {
    vi.useFakeTimers({
      now: EPOCH,
      toFake: [
        'setTimeout',
        'clearTimeout',
        'setInterval',
        'clearInterval',
        'setImmediate',
        'clearImmediate',
        'Date',
      ],
    })
    const clock = (globalThis.setTimeout as unknown as { clock: FakeClock }).clock
    const virtual = new VirtualClock(clock, seed)
    // Real timers run their callback in the async context that set them; fake ones would run it
    // in the clock's. The engine asks "am I inside a handler?" through AsyncLocalStorage, so
    // each callback is bound to its caller's context, as Node does.
    for (const name of ['setTimeout', 'setInterval', 'setImmediate'] as const) {
      const fake = globalThis[name] as unknown as (
        fn: (...args: unknown[]) => void,
        ...rest: unknown[]
      ) => unknown
      const bound = (fn: (...args: unknown[]) => void, ...rest: unknown[]): unknown =>
        fake(typeof fn === 'function' ? AsyncResource.bind(fn) : fn, ...rest)
      Object.assign(bound, { clock })
      virtual.#fakes.set(name, fake)
      ;(globalThis as Record<string, unknown>)[name] = bound
    }
    Math.random = virtual.#random
    return virtual
  }

  /** Puts real timers and Math.random back, and disables the AsyncLocalStorages seen. */
  uninstall(): void {
    for (const timer of this.#harness) clearTimeout(timer)
    this.#harness.clear()
    // The fake timers put back what they replaced only if they find their own functions.
    for (const [name, fake] of this.#fakes) (globalThis as Record<string, unknown>)[name] = fake
    vi.useRealTimers()
    Math.random = this.#originalRandom
    for (const storage of storages) storage.disable()
    storages.clear()
  }

  /** Virtual milliseconds since the schedule began. */
  get now(): number {
    return Date.now() - EPOCH
  }

  /** Timers fired so far. */
  get steps(): number {
    return this.#steps
  }

  /** Timers pending, the harness's included. */
  get timers(): number {
    return this.#clock.countTimers()
  }

  /** Timers the harness itself has pending. */
  get harnessTimers(): number {
    return this.#harness.size
  }

  /** The engine's and the transport's pending timers, described for a failure message. */
  describeTimers(): string {
    const mine = new Set([...this.#harness].map((t) => (t as unknown as { id: number }).id))
    return Object.entries(this.#clock.timers ?? {})
      .filter(([id]) => !mine.has(Number(id)))
      .map(([, t]) => {
        const name = (t.func as { name?: string } | undefined)?.name || 'anonymous'
        return `${name}@+${t.callAt - Date.now()}ms`
      })
      .join(', ')
  }

  /** A timer of the harness's own. */
  setTimeout(fn: () => void, ms: number): ReturnType<typeof setTimeout> {
    const timer = setTimeout(() => {
      this.#harness.delete(timer)
      fn()
    }, ms)
    this.#harness.add(timer)
    return timer
  }

  clearTimeout(timer: ReturnType<typeof setTimeout> | undefined): void {
    if (timer === undefined) return
    clearTimeout(timer)
    this.#harness.delete(timer)
  }

  /** Sleeps on a harness timer; an abort ends it early (resolves false). */
  sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
    if (signal?.aborted) return Promise.resolve(false)
    return new Promise((resolve) => {
      const onAbort = (): void => {
        this.clearTimeout(timer)
        resolve(false)
      }
      const timer = this.setTimeout(() => {
        signal?.removeEventListener('abort', onAbort)
        resolve(true)
      }, ms)
      signal?.addEventListener('abort', onAbort, { once: true })
    })
  }

  /** Moves the wall clock (Date.now) forward without firing any timer. */
  jump(ms: number): void {
    vi.setSystemTime(Date.now() + ms)
  }

  /** Runs every promise job that is ready, without moving time (a real macrotask turn). */
  async settle(): Promise<void> {
    await new Promise<void>((resolve) => realSetImmediate(() => resolve()))
  }

  /**
   * Fires timers one at a time, in order, until `done()` holds, no timer is left, the next one
   * is due after `untilMs` (virtual, since the start), or `maxSteps` timers have fired.
   * Answers why it stopped.
   */
  async run(
    done: () => boolean,
    untilMs: number,
    maxSteps: number,
  ): Promise<'done' | 'idle' | 'horizon' | 'steps'> {
    for (let steps = 0; ; steps++) {
      await this.settle()
      if (done()) return 'done'
      const next = this.#nextDue()
      if (next === undefined) return 'idle'
      if (next - EPOCH > untilMs) return 'horizon'
      if (steps >= maxSteps) return 'steps'
      await this.#clock.nextAsync()
      this.#steps++
    }
  }

  #nextDue(): number | undefined {
    let first: number | undefined
    for (const timer of Object.values(this.#clock.timers ?? {})) {
      if (first === undefined || timer.callAt < first) first = timer.callAt
    }
    return first
  }
}

/** A small seeded PRNG (mulberry32): the same seed gives the same jitter on every run. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}
