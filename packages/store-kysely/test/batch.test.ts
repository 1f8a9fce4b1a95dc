import { describe, expect, it } from 'vitest'
import { Batch } from '../src/internal/batch.js'

/** The end of this event-loop turn: the batch gathered in it has been handed to `run`. */
const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

/** A `run` the test answers by hand: every call is recorded with the means to settle it. */
function manualRun(): {
  run: (inputs: readonly string[]) => Promise<readonly string[]>
  calls: {
    inputs: readonly string[]
    answer: (outs: readonly string[]) => void
    fail: (error: unknown) => void
  }[]
} {
  const calls: ReturnType<typeof manualRun>['calls'] = []
  const run = (inputs: readonly string[]): Promise<readonly string[]> =>
    new Promise((answer, fail) => calls.push({ inputs, answer, fail }))
  return { run, calls }
}

describe('Batch', () => {
  it('runs the calls of one turn as one batch, in order, each answered with its own output', async () => {
    const runs: (readonly number[])[] = []
    const batch = new Batch<number, string>(async (inputs) => {
      runs.push(inputs)
      return inputs.map((n) => `out-${n}`)
    }, 10)
    const first = batch.add(1)
    // A call after a microtask of the same turn still joins it.
    await Promise.resolve()
    const rest = [2, 3].map((n) => batch.add(n))
    expect(runs).toEqual([])
    expect(await Promise.all([first, ...rest])).toEqual(['out-1', 'out-2', 'out-3'])
    expect(runs).toEqual([[1, 2, 3]])
  })

  it('shows the inputs waiting for the next batch, and none once it has started', async () => {
    const { run, calls } = manualRun()
    const batch = new Batch(run, 10)
    void batch.add('a')
    void batch.add('b')
    expect(batch.waiting.map((call) => call.input)).toEqual(['a', 'b'])
    await nextTurn()
    expect(calls).toHaveLength(1)
    expect(batch.waiting).toEqual([])
  })

  it('keeps one batch in flight: the calls made meanwhile form the next one, run once it is answered', async () => {
    const { run, calls } = manualRun()
    const batch = new Batch(run, 10)
    const a = batch.add('a')
    await nextTurn()
    const b = batch.add('b')
    const c = batch.add('c')
    await nextTurn()
    await nextTurn()
    expect(calls.map((call) => call.inputs)).toEqual([['a']])
    expect(batch.waiting.map((call) => call.input)).toEqual(['b', 'c'])
    calls[0]!.answer(['A'])
    expect(await a).toBe('A')
    expect(calls.map((call) => call.inputs)).toEqual([['a'], ['b', 'c']])
    calls[1]!.answer(['B', 'C'])
    expect(await Promise.all([b, c])).toEqual(['B', 'C'])
  })

  it('takes at most `max` inputs into one batch, the rest into the next ones, in order', async () => {
    const { run, calls } = manualRun()
    const batch = new Batch(run, 2)
    const outs = ['a', 'b', 'c', 'd', 'e'].map((input) => batch.add(input))
    await nextTurn()
    expect(calls.map((call) => call.inputs)).toEqual([['a', 'b']])
    calls[0]!.answer(['A', 'B'])
    await Promise.resolve()
    expect(calls.map((call) => call.inputs)).toEqual([
      ['a', 'b'],
      ['c', 'd'],
    ])
    calls[1]!.answer(['C', 'D'])
    await Promise.resolve()
    calls[2]!.answer(['E'])
    expect(await Promise.all(outs)).toEqual(['A', 'B', 'C', 'D', 'E'])
    expect(calls.map((call) => call.inputs)).toEqual([['a', 'b'], ['c', 'd'], ['e']])
  })

  it('rejects every call of a batch that fails with its error, and runs the next batch all the same', async () => {
    const { run, calls } = manualRun()
    const batch = new Batch(run, 10)
    const failing = [batch.add('a'), batch.add('b')]
    await nextTurn()
    const next = batch.add('c')
    const refused = new Error('refused')
    calls[0]!.fail(refused)
    for (const result of await Promise.allSettled(failing)) {
      expect(result).toEqual({ status: 'rejected', reason: refused })
    }
    expect(calls.map((call) => call.inputs)).toEqual([['a', 'b'], ['c']])
    calls[1]!.answer(['C'])
    expect(await next).toBe('C')
  })

  it('starts again, at the end of the turn, once every batch is done', async () => {
    const { run, calls } = manualRun()
    const batch = new Batch(run, 10)
    const a = batch.add('a')
    await nextTurn()
    calls[0]!.answer(['A'])
    await a
    await nextTurn()
    const b = batch.add('b')
    const c = batch.add('c')
    expect(calls).toHaveLength(1)
    await nextTurn()
    expect(calls.map((call) => call.inputs)).toEqual([['a'], ['b', 'c']])
    calls[1]!.answer(['B', 'C'])
    expect(await Promise.all([b, c])).toEqual(['B', 'C'])
  })
})
