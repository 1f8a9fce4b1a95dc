/** `2d 3h`, `5m 12s`, `800ms`: the two largest units of a duration. */
export function humanDuration(ms: number): string {
  if (ms < 1_000) return `${Math.max(0, Math.round(ms))}ms`
  const units: [string, number][] = [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1_000],
  ]
  const parts: string[] = []
  let rest = ms
  for (const [name, size] of units) {
    const n = Math.floor(rest / size)
    if (n > 0 || parts.length > 0) parts.push(`${n}${name}`)
    rest -= n * size
    if (parts.length === 2) break
  }
  return parts.filter((p) => !p.startsWith('0')).join(' ') || '0s'
}

/** Rows as aligned columns under a header. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const line = (cells: readonly string[]): string =>
    cells.map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  ')
  return [line(header), ...rows.map(line)].join('\n')
}
