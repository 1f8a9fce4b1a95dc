import { describe, expect, it } from 'vitest'
import { backoffDelay } from '../../src/internal/amqp-helpers.js'

describe('backoffDelay', () => {
  it('doubles from the initial delay with ±20 % jitter and never exceeds the cap', () => {
    const backoff = { initialDelay: 100, maxDelay: 1_000 }
    for (let i = 0; i < 200; i++) {
      const first = backoffDelay(backoff, 1)
      expect(first).toBeGreaterThanOrEqual(80)
      expect(first).toBeLessThanOrEqual(120)
      const third = backoffDelay(backoff, 3)
      expect(third).toBeGreaterThanOrEqual(320)
      expect(third).toBeLessThanOrEqual(480)
      expect(backoffDelay(backoff, 50)).toBeLessThanOrEqual(1_000)
    }
  })
})
