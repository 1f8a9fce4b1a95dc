// One relay process of the cross-process race: opens the outbox on the shared file, says
// "ready", waits for the go line on stdin, claims batches until none is left (marking each
// published), and prints the ids it claimed.
import { SqliteOutboxStore } from '../../src/index.js'

const [path] = process.argv.slice(2)
if (path === undefined) throw new Error('usage: outbox-claim-worker <db>')
const store = new SqliteOutboxStore(path, { busyTimeout: '30s' })

process.stdout.write('ready\n')
await new Promise((resolve) => process.stdin.once('data', resolve))

const claimed: string[] = []
for (;;) {
  const batch = await store.claimBatch(7, 60_000)
  if (batch.length === 0) break
  for (const record of batch) claimed.push(record.id)
  await store.markPublished(batch.map((record) => record.id))
}
process.stdout.write(`${JSON.stringify({ claimed })}\n`)
await store.close()
