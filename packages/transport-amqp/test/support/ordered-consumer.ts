// A second process for the ordered-queue tests: consumes the ordered queue ORDERED_NAME
// (ORDERED_PARTITIONS partitions) on ORDERED_URL and tells its parent, over IPC, every entry
// it handles — before the handler returns, so nothing is acked that the parent has not heard of.
import { AceMq } from '@acemq/core'
import { AmqpTransport } from '../../src/index.js'

interface Entry {
  readonly account: string
  readonly seq: number
  readonly poison?: boolean
}

const url = process.env['ORDERED_URL'] as string
const name = process.env['ORDERED_NAME'] as string
const partitions = Number(process.env['ORDERED_PARTITIONS'])
const handlerMs = Number(process.env['ORDERED_HANDLER_MS'] ?? '0')
// Set: a poison entry fails here, and its partition halts at once.
const failPoison = process.env['ORDERED_FAIL_POISON'] === '1'

function tell(message: unknown): Promise<void> {
  return new Promise((resolve, reject) => {
    process.send?.(message, undefined, {}, (error) => (error ? reject(error) : resolve()))
  })
}

const mq = await AceMq.connect(
  new AmqpTransport(url, {
    connectionName: `ordered-consumer-${process.pid}`,
    recovery: { initialDelay: 100, maxDelay: 500 },
  }),
)
const ledger = await mq
  .ordered<Entry>(name)
  .partitions(partitions)
  .keyedBy((entry) => entry.account)
  .onFailure('stop', { attempts: 1 })
  .declare()
await ledger.consume(async (message) => {
  if (handlerMs > 0) await new Promise((resolve) => setTimeout(resolve, handlerMs))
  if (failPoison && message.payload.poison === true) {
    await tell({ type: 'failed', pid: process.pid, entry: message.payload })
    throw new Error('poison entry')
  }
  await tell({ type: 'handled', pid: process.pid, entry: message.payload, queue: message.queue })
})
await tell({ type: 'consuming', pid: process.pid })
process.on('message', (message: { type?: string }) => {
  // A graceful stop, as on SIGTERM: drain, then close.
  if (message.type === 'close') {
    void mq.close().then(async () => {
      await tell({ type: 'closed', pid: process.pid, halted: ledger.haltedPartitions })
      process.exit(0)
    })
  }
})
process.on('disconnect', () => void mq.close({ drainTimeout: 0 }).then(() => process.exit(0)))
