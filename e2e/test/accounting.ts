/** Prints an accounting table (label, value) so that CI output shows the numbers of a run. */
export function printAccounting(
  title: string,
  rows: readonly (readonly [string, string | number])[],
): void {
  const width = Math.max(...rows.map(([label]) => label.length))
  const valueWidth = Math.max(...rows.map(([, value]) => String(value).length))
  const rule = '-'.repeat(width + valueWidth + 5)
  const body = rows.map(
    ([label, value]) => `| ${label.padEnd(width)} ${String(value).padStart(valueWidth)} |`,
  )
  console.log(['', title, rule, ...body, rule].join('\n'))
}
