import { describe, expect, it } from 'vitest'
import { ConfigurationError } from '@acemq/core'
import { attemptOrder, validNodeOrder } from '../../src/internal/node-order.js'

describe('attemptOrder', () => {
  const nodes = ['a', 'b', 'c'] as const

  it('tries the nodes as listed in order, and the node just lost last', () => {
    expect(attemptOrder(nodes, 'in-order', undefined)).toEqual(['a', 'b', 'c'])
    expect(attemptOrder(nodes, 'in-order', 'a')).toEqual(['b', 'c', 'a'])
    expect(attemptOrder(nodes, 'in-order', 'b')).toEqual(['a', 'c', 'b'])
  })

  it('shuffles afresh on every attempt, every node first about as often, the lost node always last', () => {
    const first = new Map<string, number>()
    for (let i = 0; i < 3_000; i++) {
      const order = attemptOrder(nodes, 'shuffle', undefined)
      expect([...order].sort()).toEqual(['a', 'b', 'c'])
      first.set(order[0] as string, (first.get(order[0] as string) ?? 0) + 1)
      expect(attemptOrder(nodes, 'shuffle', 'c').at(-1)).toBe('c')
    }
    for (const node of nodes) expect(first.get(node)).toBeGreaterThan(800)
  })

  it('refuses an order it does not know', () => {
    expect(validNodeOrder('in-order')).toBe('in-order')
    expect(() => validNodeOrder('random')).toThrow(ConfigurationError)
    expect(() => validNodeOrder('random')).toThrow(/nodeOrder must be 'shuffle' or 'in-order'/)
  })
})
