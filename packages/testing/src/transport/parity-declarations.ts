import { beforeEach, describe, expect, it } from 'vitest'
import { type Declaration, type Transport } from '@acemq/core/spi'
import { type ParityKit } from './parity-kit.js'

/** Which declarations the broker refuses. */
export function declarationsParity(kit: ParityKit): void {
  const { fresh, exchange, queue, publish, bodies, refusal } = kit
  let t: Transport
  beforeEach(() => {
    t = kit.transport()
  })

  describe('declarations', () => {
    it('refuses to re-declare a queue or an exchange with settings the broker compares (PRECONDITION_FAILED)', async () => {
      const [q, quorum, x] = [fresh('q'), fresh('quorum'), fresh('x')]
      await t.declare([
        queue(q, 'classic', { 'x-message-ttl': 100 }),
        queue(quorum, 'quorum', { 'x-delivery-limit': 3 }),
        exchange(x, 'direct', { 'alternate-exchange': 'ae' }),
      ])
      const conflicts: Declaration[] = [
        queue(q, 'classic', { 'x-message-ttl': 200 }),
        queue(q, 'classic', {}),
        queue(q, 'classic', { 'x-message-ttl': '100' }),
        queue(q, 'classic', { 'x-message-ttl': 100, 'x-dead-letter-exchange': 'dlx' }),
        queue(q, 'quorum', { 'x-message-ttl': 100 }),
        queue(q, 'classic', { 'x-message-ttl': 100 }, false),
        queue(quorum, 'quorum', { 'x-delivery-limit': 5 }),
        exchange(x, 'topic', { 'alternate-exchange': 'ae' }),
        exchange(x, 'direct', { 'alternate-exchange': 'other' }),
        exchange(x, 'direct', { 'alternate-exchange': 'ae' }, false),
      ]
      for (const conflict of conflicts) {
        const error = await refusal(t.declare([conflict]))
        expect(error.code, JSON.stringify(conflict)).toBe('ACEMQ_DECLARATION_FAILED')
        expect(error.message).toMatch(/PRECONDITION_FAILED/)
      }
      // The transport keeps working after a refusal.
      await publish('', q, 'still here')
      expect(await bodies(q, 1)).toEqual(['still here'])
    })

    it('accepts a re-declaration that differs only where the broker does not look', async () => {
      const [q, x] = [fresh('q'), fresh('x')]
      await t.declare([
        queue(q, 'classic', { 'x-message-ttl': 100, note: 'a' }),
        exchange(x, 'direct', { note: 'a' }),
      ])
      await expect(
        t.declare([
          queue(q, 'classic', { 'x-message-ttl': { '!': 'int', value: 100 }, note: 'b' }),
          queue(q, 'classic', { 'x-message-ttl': 100 }),
          exchange(x, 'direct', { note: 'b' }),
          exchange(x, 'direct'),
        ]),
      ).resolves.toBeUndefined()
    })

    it('refuses queue arguments the broker cannot accept', async () => {
      const invalid: Declaration[] = [
        queue(fresh('q'), 'classic', { 'x-message-ttl': -1 }),
        queue(fresh('q'), 'classic', { 'x-dead-letter-routing-key': 'k' }),
        queue(fresh('q'), 'quorum', {}, false),
      ]
      for (const declaration of invalid) {
        const error = await refusal(t.declare([declaration]))
        expect(error.message, JSON.stringify(declaration)).toMatch(/PRECONDITION_FAILED/)
      }
    })
  })
}
