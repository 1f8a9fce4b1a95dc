/** A demo queue name: `demo.x` in memory, `demo-1a2b3c.x` on a shared broker. */
const q = (name: string): string => `demo(?:-[0-9a-f]{6})?\\.${name.replaceAll('.', '\\.')}`

/**
 * What the demo must show, scenario by scenario, whatever it runs on: each entry is the
 * behaviour in a sentence and the lines that prove it, in order.
 */
export const story: readonly (readonly [string, readonly RegExp[]])[] = [
  [
    'a flaky handler recovers after two jittered waits in the consumer',
    [
      /── 1\. Flaky handler: jittered retries/,
      /handler +o-1001 +attempt 1: payment gateway timed out/,
      /engine +o-1001 +retried: waited \d+ ms in the consumer, sent as attempt 2/,
      /engine +o-1001 +retried: waited \d+ ms in the consumer, sent as attempt 3/,
      /handler +o-1001 +attempt 3: charged/,
      /engine +o-1001 +acked on attempt 3/,
    ],
  ],
  [
    'one wait is spent in a broker rung, named after its delay',
    [
      /── 2\. A wait spent in a broker rung/,
      new RegExp(`engine +o-1002 +retried: waits 1 s in broker rung ${q('invoices.retry.1s')}`),
      new RegExp(`demo +o-1002 +meanwhile: 1 message on ${q('invoices.retry.1s')}`),
      /handler +o-1002 +attempt 2, [\d.]+ m?s after attempt 1: invoiced/,
      /engine +o-1002 +acked on attempt 2/,
    ],
  ],
  [
    'a poison message is dead-lettered, and its reason is read back from the .dlq',
    [
      /── 3\. A poison message, dead-lettered with its reason/,
      new RegExp(`engine +o-1003 +dead-lettered to ${q('shipping.dlq')}: gave up after 3`),
      new RegExp(`demo +o-1003 +read back from ${q('shipping.dlq')}:`),
      /x-acemq-error: gave up after 3 attempt\(s\): no such SKU XL-PURPLE$/,
      /x-acemq-attempt: 3, body: \{"id":"o-1003","sku":"XL-PURPLE"\}/,
    ],
  ],
  [
    'a duplicate is acked without running the handler again',
    [
      /── 4\. A duplicate, suppressed/,
      /demo +o-1004 +publishing it twice with the same message id/,
      /handler +o-1004 +sending the order confirmation email/,
      /engine +o-1004 +duplicate: confirmed in the store already, acked without running the handler/,
      /demo +o-1004 +2 deliveries, 1 email sent/,
    ],
  ],
  [
    'a message claimed elsewhere is put back without spending an attempt, then handled',
    [
      /── 5\. In progress elsewhere: put back, no attempt spent/,
      /demo +o-1005 +another worker claims it first \(store answers 'claimed'\)/,
      /engine +o-1005 +in progress elsewhere: put back, attempt 1 unchanged/,
      /engine +o-1005 +in progress elsewhere: put back, attempt 1 unchanged/,
      /demo +o-1005 +the other worker lets go of its claim \(release\)/,
      /handler +o-1005 +attempt 1: stock reserved/,
      /engine +o-1005 +acked on attempt 1/,
    ],
  ],
  [
    'pausing holds deliveries at the gate, draining waits for the running handler, resuming hands them over',
    [
      /── 6\. Pause and drain/,
      /pauseConsuming\(\): inFlight 1, held 4 \(delivered, not acked\)/,
      /drainConsumers\('5s'\) → true after \d+ ms: inFlight 0, held 4/,
      /resumeConsuming\(\): the held orders are handed over/,
      /all 5 orders packed and acked/,
    ],
  ],
  [
    'the health JSON is printed, UP, with the connection and the store',
    [
      /── 7\. Health/,
      /^ {3}\{$/,
      /^ {5}"status": "UP",$/,
      /"connection": \{/,
      /"idempotency-store": \{/,
    ],
  ],
  [
    'a pipeline carries a run through its steps, retries one step alone, and ends another run early',
    [
      new RegExp(`── 8\\. A pipeline: reserve, charge, ship ─+ ${q('checkout.reserve')}$`),
      /demo +o-1008 +sending it into reserve -> charge -> ship/,
      /handler +o-1008 +reserve: stock held/,
      /handler +o-1008 +charge attempt 1: card network busy \(throws\)/,
      /engine +o-1008 +retried: waited 100 ms in the consumer, sent as attempt 2/,
      /handler +o-1008 +charge attempt 2: charged/,
      /handler +o-1008 +ship: label printed/,
      new RegExp(`engine +o-1008 +run completed at ship: ${q('checkout.ship')} acked`),
      /handler +o-1009 +reserve: unknown SKU, the run ends here \(returns null\)/,
      new RegExp(`engine +o-1009 +run ended early at reserve: ${q('checkout.reserve')} acked`),
      /checkout: 2 entered, 1 completed, 1 ended early$/,
    ],
  ],
  [
    'it closes, cleans up after itself, and ends with the summary table',
    [
      /── 9\. Shutdown/,
      /mq\.close\(\): drained and closed in \d+ ms/,
      /cleaned up: deleted 28 demo queues, /,
      /^Summary$/,
      /^ {2}# +scenario +queue +outcome +what happened$/,
      new RegExp(
        `^ {2}1 +flaky handler +${q('payments')} +acked +3 attempts; waited \\d+ ms, \\d+ ms`,
      ),
      new RegExp(`^ {2}2 +broker rung +${q('invoices')} +acked +2 attempts; waited 1 s on`),
      new RegExp(
        `^ {2}3 +poison message +${q('shipping')} +dead_lettered +${q('shipping.dlq')}: gave up`,
      ),
      new RegExp(`^ {2}4 +duplicate +${q('emails')} +acked ×2 +handler ran 1× for 2 copies`),
      new RegExp(`^ {2}5 +in-progress put-back +${q('stock')} +in_progress ×\\d+, acked +put back`),
      new RegExp(`^ {2}6 +pause and drain +${q('packing')} +acked ×5 +held 4 while paused`),
      /^ {2}7 +health +UP +connection UP, idempotency-store UP; inFlight 0$/,
      new RegExp(
        `^ {2}8 +pipeline +${q('checkout.reserve')} +completed, ended_early +2 entered, 1 completed, 1 ended early; charge retried once$`,
      ),
      /^Done in [\d.]+ m?s\.$/,
    ],
  ],
]

/** The health JSON block the demo prints, parsed. */
export function printedHealth(output: string): {
  status: string
  inFlight: number
  components: Record<string, Record<string, string>>
} {
  const lines = output.split('\n')
  const start = lines.findIndex((line) => line === '   {')
  const end = lines.findIndex((line, i) => i > start && line === '   }')
  return JSON.parse(lines.slice(start, end + 1).join('\n'))
}

/** The demo's own measure of how long it took, in milliseconds. */
export function reportedDuration(output: string): number {
  const match = /^Done in ([\d.]+) (m?s)\.$/m.exec(output)
  if (match === null) throw new Error(`no "Done in" line in:\n${output}`)
  return Number(match[1]) * (match[2] === 's' ? 1_000 : 1)
}
