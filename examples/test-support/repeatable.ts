import { expect } from 'vitest'
import { AmqpAdmin } from '../../test-support/amqp-admin.js'
import { runExample } from './run-example.js'

/** Output with what may differ between two runs (numbers, ids, ports) made equal. */
function normalized(output: string, sorted: boolean, more: (line: string) => string): string[] {
  const lines = output
    .split('\n')
    .map((line) =>
      more(line)
        .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, '<uuid>')
        .replace(/\b[0-9a-f]{16,}\b/gi, '<hex>')
        // A measured figure may print with or without decimals (1 s, 1.02 s).
        .replace(/\d+(?:\.\d+)?/g, '<n>'),
    )
    // Node's own warnings name the pid and are not the example's output.
    .filter((line) => line !== '' && !/^\(node:<n>\)/.test(line))
  return sorted ? lines.sort() : lines
}

/**
 * Runs an example twice, one run after the other: both exit 0 with the same output — numbers,
 * ids and ports aside; in any order when `anyOrder` (concurrent exporters) — and `queues` no
 * longer exist afterwards. Returns the first run's output.
 */
export async function expectRepeatable(
  name: string,
  env: Record<string, string | undefined>,
  options: {
    readonly queues?: readonly string[]
    readonly anyOrder?: boolean
    /** What else differs between two runs, made equal (a temporary directory's name, say). */
    readonly normalize?: (line: string) => string
  } = {},
): Promise<string> {
  const more = options.normalize ?? ((line: string) => line)
  const first = await runExample(name, env)
  expect(first.code, first.output).toBe(0)
  const second = await runExample(name, env)
  expect(second.code, second.output).toBe(0)
  expect(normalized(second.output, options.anyOrder ?? false, more)).toStrictEqual(
    normalized(first.output, options.anyOrder ?? false, more),
  )
  if (options.queues !== undefined && options.queues.length > 0) {
    const admin = await AmqpAdmin.open()
    try {
      const left: string[] = []
      for (const queue of options.queues) {
        if ((await admin.count(queue)) !== undefined) left.push(queue)
      }
      expect(left, 'queues the example left behind').toStrictEqual([])
    } finally {
      await admin.close()
    }
  }
  return first.output
}
