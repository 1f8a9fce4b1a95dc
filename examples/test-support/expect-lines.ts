import { expect } from 'vitest'

/** Asserts that lines of `output` match `patterns`, in this order (other lines may come between). */
export function expectLinesInOrder(output: string, patterns: readonly RegExp[]): void {
  const lines = output.split('\n')
  let from = 0
  for (const pattern of patterns) {
    const index = lines.findIndex((line, i) => i >= from && pattern.test(line))
    expect(
      index,
      `no line matching ${pattern} after line ${from} of:\n${output}`,
    ).toBeGreaterThanOrEqual(0)
    from = index + 1
  }
}
