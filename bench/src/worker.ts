// The child-process side of the benchmark: runs one task (argv[2], JSON) and sends its result
// to the parent over IPC. See internal/child.ts.
import type { Task, WorkerMessage } from './internal/child.js'
import { watchBroker } from './internal/profiler.js'
import { findWorker } from './workers.js'

function send(message: WorkerMessage): Promise<void> {
  return new Promise((resolve) => {
    if (process.send === undefined) {
      console.log(JSON.stringify(message))
      resolve()
    } else process.send(message, undefined, {}, () => resolve())
  })
}

/** Resolves when the parent sends `{ type: 'go' }`. */
const go = new Promise<void>((resolve) => {
  process.on('message', (message: { type?: string }) => {
    if (message.type === 'go') resolve()
  })
})

async function main(): Promise<void> {
  const task = JSON.parse(process.argv[2] ?? '{}') as Task
  try {
    watchBroker(task.brokerPids ?? [])
    const worker = await findWorker(task.worker)
    if (worker === undefined) throw new Error(`no worker named '${task.worker}'`)
    const result = await worker(task.params, {
      profile: task.profile,
      progress: (data) => void send({ type: 'progress', data }),
      go: () => go,
    })
    await send({ type: 'result', result })
  } catch (error) {
    await send({
      type: 'error',
      message: error instanceof Error ? (error.stack ?? error.message) : String(error),
    })
  }
  // Whatever a library left open (timers, sockets) must not keep the measurement waiting.
  process.exit(0)
}

void main()
