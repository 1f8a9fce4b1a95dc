// One relay process of the cross-process race: opens the outbox on the shared file, says
// "ready", waits for the go line on stdin, claims one batch and says "first" (holding it, so
// both processes hold claims at once however the machine schedules them), waits for the second
// go line, then claims batches until none is left (marking each published), and prints the ids
// it claimed.
import { SqliteOutboxStore } from '../../src/index.js'

const [path] = process.argv.slice(2)
if (path === undefined) throw new Error('usage: outbox-claim-worker <db>')
const store = new SqliteOutboxStore(path, { busyTimeout: '30s' })

const lines: string[] = []
const waiters: (() => void)[] = []
let buffered = ''
process.stdin.on('data', (chunk: Buffer) => {
  buffered += chunk.toString()
  for (let end = buffered.indexOf('\n'); end >= 0; end = buffered.indexOf('\n')) {
    lines.push(buffered.slice(0, end))
    buffered = buffered.slice(end + 1)
    waiters.shift()?.()
  }
})
let read = 0
async function nextLine(): Promise<void> {
  if (lines.length <= read) await new Promise<void>((resolve) => waiters.push(resolve))
  read++
}

process.stdout.write('ready\n')
await nextLine()

const claimed: string[] = []
const first = await store.claimBatch(7, 60_000)
for (const record of first) claimed.push(record.id)
process.stdout.write('first\n')
await nextLine()
if (first.length > 0) await store.markPublished(first.map((record) => record.id))
for (;;) {
  const batch = await store.claimBatch(7, 60_000)
  if (batch.length === 0) break
  for (const record of batch) claimed.push(record.id)
  await store.markPublished(batch.map((record) => record.id))
}
process.stdin.destroy()
process.stdout.write(`${JSON.stringify({ claimed })}\n`)
await store.close()
