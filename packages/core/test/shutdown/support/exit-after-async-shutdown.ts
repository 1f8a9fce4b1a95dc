// Run by shutdown-on-signals.test.ts in a child process: shutdownOnSignals with its default
// `exit: true` and an async onShutdown that closes three things, one after the other, as a
// service closes its HTTP server, its database pool and its telemetry. Prints "ready" once
// the handler is installed.
import { setTimeout as sleep } from 'node:timers/promises'
import { AceMq, InMemoryTransport, shutdownOnSignals } from '../../../src/index.js'

const mq = await AceMq.connect(new InMemoryTransport())
shutdownOnSignals(mq, {
  signals: ['SIGTERM'],
  onShutdown: async () => {
    for (const resource of ['http server', 'pg pool', 'otel sdk']) {
      await sleep(50)
      process.stdout.write(`closed ${resource}\n`)
    }
  },
})
// Stays alive until the signal: the in-memory connection holds no handle of its own.
setInterval(() => undefined, 60_000)
process.stdout.write('ready\n')
