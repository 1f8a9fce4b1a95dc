// One process of the cross-process race: opens the store on the shared file, says "ready",
// waits for the go line on stdin, tries to claim every id, and prints the ids it claimed.
import { SqliteIdempotencyStore } from '../../src/index.js'

const [path, idsJson] = process.argv.slice(2)
if (path === undefined || idsJson === undefined)
  throw new Error('usage: claim-worker <db> <ids-json>')
const ids = JSON.parse(idsJson) as string[]
const store = new SqliteIdempotencyStore(path, { busyTimeout: '30s' })

process.stdout.write('ready\n')
await new Promise((resolve) => process.stdin.once('data', resolve))

const claimed: string[] = []
const answers: Record<string, number> = {}
for (const id of ids) {
  const result = await store.tryClaim(id)
  answers[result] = (answers[result] ?? 0) + 1
  if (result === 'claimed') {
    claimed.push(id)
    await store.confirm(id)
  }
}
process.stdout.write(`${JSON.stringify({ claimed, answers })}\n`)
await store.close()
