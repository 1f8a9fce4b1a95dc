/**
 * The demo's output: short labelled lines, so what your handler did (`handler`) reads apart
 * from what AceMQ decided (`engine`) and from what the demo itself does (`demo`).
 */

export type Speaker = 'handler' | 'engine' | 'demo'

/** `── 1. Flaky handler: jittered retries ──────────── demo.payments` */
export function heading(number: number, title: string, queue?: string): void {
  const left = `── ${number}. ${title} `
  const right = queue === undefined ? '' : ` ${queue}`
  console.log(`\n${left.padEnd(Math.max(left.length + 3, 76 - right.length), '─')}${right}`)
}

/** `   engine   o-1001  retried: waited 187 ms in the consumer` */
export function say(who: Speaker, subject: string, text: string): void {
  console.log(`   ${who.padEnd(8)} ${subject.padEnd(7)} ${text}`)
}

/** A duration the way people read it: `187 ms`, `1 s`, `1.02 s`. */
export function ms(value: number): string {
  return value < 1_000 ? `${Math.round(value)} ms` : `${Number((value / 1_000).toFixed(2))} s`
}

/** A plain table with a header row and padded columns. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const render = (cells: readonly string[]): string =>
    `  ${cells.map((cell, i) => cell.padEnd(widths[i] ?? 0)).join('  ')}`.trimEnd()
  console.log(render(header))
  console.log(render(widths.map((w) => '─'.repeat(w))))
  for (const row of rows) console.log(render(row))
}
