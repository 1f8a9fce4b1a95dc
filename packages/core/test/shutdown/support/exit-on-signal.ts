// Run by shutdown-on-signals.test.ts in a child process: shutdownOnSignals with its default
// `exit: true` and an onShutdown that throws. Prints "ready" once the handler is installed.
import { AceMq, InMemoryTransport, shutdownOnSignals } from '../../../src/index.js'

const mq = await AceMq.connect(new InMemoryTransport())
shutdownOnSignals(mq, {
  signals: ['SIGTERM'],
  onShutdown: () => {
    throw new Error('the logger is gone')
  },
})
// Stays alive until the signal: the in-memory connection holds no handle of its own.
setInterval(() => undefined, 60_000)
process.stdout.write('ready\n')
