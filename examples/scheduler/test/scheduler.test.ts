import { describe, it } from 'vitest'
import { expectLinesInOrder } from '../../test-support/expect-lines.js'
import { expectRepeatable } from '../../test-support/repeatable.js'

describe('the scheduler example', () => {
  it('delivers three reminders in due order, holds one whose queue is missing until it exists, and runs again the same way', async () => {
    const output = await expectRepeatable('scheduler', {})
    expectLinesInOrder(output, [
      /^scheduled: 4$/,
      /^stretch: arrived \(id r-stretch, after 1\.\d s\)$/,
      /^drink water: arrived \(id r-water, after 1\.\d s\)$/,
      /^stand up: arrived \(id r-stand-up, after 2\.\d s\)$/,
      /^scheduler health: DEGRADED, retrying 1$/,
      /^call back: arrived once its queue existed$/,
      /^delivered: 4, failures along the way: 1$/,
    ])
  }, 60_000)
})
