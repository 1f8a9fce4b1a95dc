import { fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'

/** What a child process runs: a worker by name, its parameters, and whether to profile it. */
export interface Task {
  readonly worker: string
  readonly params: unknown
  /** Write a CPU profile of the measured part to this path. */
  readonly profile?: string
  /** Processes (the broker's) whose CPU `measured()` reports beside the child's own. */
  readonly brokerPids?: readonly number[]
}

/** Messages a worker sends to the parent. */
export type WorkerMessage =
  | { readonly type: 'result'; readonly result: unknown }
  | { readonly type: 'error'; readonly message: string }
  | { readonly type: 'progress'; readonly data: unknown }

const WORKER = fileURLToPath(new URL('../worker.ts', import.meta.url))

/**
 * Runs one task in a fresh Node process (same loader and conditions as this one, plus
 * `--expose-gc`) and resolves with what it reports. A fresh process per measurement keeps one
 * contestant's JIT state, heap and async hooks from billing the next one.
 */
export function runInChild<R>(
  task: Task,
  options: {
    readonly timeoutMs?: number
    readonly onProgress?: (data: unknown) => void
    /** When it resolves, the child is told to go on (its worker awaits `context.go()`). */
    readonly go?: Promise<void>
  } = {},
): Promise<R> {
  const timeoutMs = options.timeoutMs ?? 180_000
  return new Promise<R>((resolve, reject) => {
    const child = fork(WORKER, [JSON.stringify(task)], {
      // Source maps only when profiling: they make every `error.stack` slow.
      execArgv: [
        ...process.execArgv,
        '--expose-gc',
        ...(task.profile === undefined ? [] : ['--enable-source-maps']),
      ],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    })
    let settled = false
    const finish = (error: Error | undefined, result?: unknown): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      if (error !== undefined) {
        child.kill('SIGKILL')
        reject(error)
      } else resolve(result as R)
    }
    const timer = setTimeout(
      () =>
        finish(new Error(`worker '${task.worker}' did not finish within ${timeoutMs / 1000} s`)),
      timeoutMs,
    )
    child.on('message', (message: WorkerMessage) => {
      if (message.type === 'progress') options.onProgress?.(message.data)
      else if (message.type === 'error')
        finish(new Error(`worker '${task.worker}' failed: ${message.message}`))
      else finish(undefined, message.result)
    })
    void options.go?.then(() => {
      if (!settled && child.connected) child.send({ type: 'go' })
    })
    child.on('error', (error) => finish(error))
    child.on('exit', (code, signal) => {
      if (!settled)
        finish(new Error(`worker '${task.worker}' exited (${signal ?? code}) without a result`))
    })
  })
}
