import { deadLetterQueueName, parkedQueueName, type HealthReport } from '@acemq/core'
import { connect } from '@acemq/transport-amqp'
import amqplib from 'amqplib'

/** One ledger entry: the n-th movement on an account. The amount comes as text from upstream. */
interface Entry {
  readonly account: string
  readonly seq: number
  readonly amount: string
}

const url = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672'
const name = process.env.LEDGER ?? 'examples.ordered-ledger'
const accounts = ['acct-1', 'acct-2', 'acct-3', 'acct-4', 'acct-5', 'acct-6']
const entriesPerAccount = 5
const poisoned = { account: 'acct-3', seq: 3 } // its amount arrives as 'ten'

await using mq = await connect(url, { onError: () => undefined }) // the halt is reported below
const ledger = await mq
  .ordered<Entry>(name)
  .partitions(4)
  .keyedBy((entry) => entry.account) // one account's entries: one partition, in order
  .onFailure('stop', { attempts: 2, delay: '100ms' }) // then halt the partition
  .declare()

const balances = new Map<string, { seq: number; balance: number }>()
const corrections = new Map<string, number>() // entry id → amount, set by an operator
let booked = 0
let allBooked!: () => void
const done = new Promise<void>((resolve) => (allBooked = resolve))

await ledger.consume((message) => {
  const entry = message.payload
  const account = balances.get(entry.account) ?? { seq: 0, balance: 0 }
  if (entry.seq !== account.seq + 1) {
    // Never happens: the partition hands this account's entries over one at a time, in order.
    console.log(`OUT OF ORDER: ${entry.account} #${entry.seq} after #${account.seq}`)
    process.exit(1)
  }
  const amount = corrections.get(message.envelope.id) ?? Number(entry.amount)
  if (!Number.isFinite(amount)) throw new Error(`amount '${entry.amount}' is not a number`)
  balances.set(entry.account, { seq: entry.seq, balance: account.balance + amount })
  console.log(`booked ${entry.account} #${entry.seq} (${amount})`)
  if (++booked === accounts.length * entriesPerAccount) allBooked()
})

// Each account's entries are sent in order; the accounts are spread over the partitions.
for (let seq = 1; seq <= entriesPerAccount; seq++) {
  for (const account of accounts) {
    const bad = account === poisoned.account && seq === poisoned.seq
    await ledger.send({ account, seq, amount: bad ? 'ten' : '10' }, { id: `${account}#${seq}` })
  }
}

const partition = ledger.partitionOf(poisoned.account)
const neighbours = accounts.filter((a) => ledger.partitionOf(a) === partition)
while (ledger.haltedPartitions.length === 0) await sleep(20)
const report = await orderedReport()
console.log(
  `halted: partitions ${ledger.haltedPartitions.join(',')} (${ledger.queueFor(partition)})`,
)
console.log(`health: ${report.status} ${JSON.stringify(report.details)}`)
// Accounts on the other partitions carry on meanwhile.
while (booked < accounts.length * entriesPerAccount - (entriesPerAccount - 2) * neighbours.length)
  await sleep(20)
console.log(
  `meanwhile: ${booked} entries booked; ${neighbours.join(', ')} wait behind ${poisoned.account} #${poisoned.seq}`,
)

// The operator looks at the entry, books it at 10, and resumes the partition.
corrections.set(`${poisoned.account}#${poisoned.seq}`, 10)
ledger.resume(partition)
console.log(
  `operator: corrected ${poisoned.account} #${poisoned.seq} and resumed partition ${partition}`,
)
await done
console.log(`health: ${(await orderedReport()).status}`)
for (const account of accounts) {
  const { seq, balance } = balances.get(account) ?? { seq: 0, balance: 0 }
  console.log(`${account}: ${seq} entries in order, balance ${balance}`)
}
console.log(`booked ${booked} entries (${ledger.handled} handled, ${ledger.failed} failed runs)`)
await mq.close()

// A demo run leaves nothing behind, so it runs again the same way; a real service keeps its queues.
const admin = await amqplib.connect(url)
const channel = await admin.createChannel()
const partitionQueues = Array.from({ length: 4 }, (_, p) => ledger.queueFor(p))
for (const queue of partitionQueues) {
  for (const leftover of [queue, deadLetterQueueName(queue), parkedQueueName(queue)]) {
    await channel.deleteQueue(leftover)
  }
}
await admin.close()
console.log(`removed ${partitionQueues.length} partition queues and their .dlq and .parked`)

async function orderedReport(): Promise<HealthReport> {
  const { reports } = await mq.health()
  return reports.find((r) => r.name === `ordered:${name}`) as HealthReport
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
