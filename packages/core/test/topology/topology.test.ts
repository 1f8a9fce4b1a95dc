import { describe, expect, it } from 'vitest'
import { ConfigurationError, RetryPolicy, Topology } from '../../src/index.js'
import { consumerDeclarations, type Declaration } from '../../src/spi.js'
import { contractFixtures } from '../fixtures.js'

const fixture = contractFixtures.topology
const policy = RetryPolicy.exponential(6, '10s', '5m')

interface FixtureItem {
  readonly declaredBy: string
  readonly [key: string]: unknown
}

/** A declaration in the fixture's own shape, so the two can be compared field by field. */
function asFixture(declaration: Declaration): Record<string, unknown> {
  switch (declaration.kind) {
    case 'exchange':
      return {
        kind: 'exchange',
        name: declaration.name,
        type: declaration.type,
        durable: declaration.durable,
      }
    case 'queue':
      return {
        kind: 'queue',
        name: declaration.name,
        type: declaration.type,
        durable: declaration.durable,
        arguments: declaration.arguments,
      }
    case 'binding':
      return {
        kind: 'binding',
        queue: declaration.queue,
        exchange: declaration.exchange,
        routingKey: declaration.routingKey,
      }
  }
}

function fixtureItems(by: (declaredBy: string) => boolean): Record<string, unknown>[] {
  const strip = (kind: string) => (item: FixtureItem) => {
    const { declaredBy: _by, ...rest } = item
    return { kind, ...rest }
  }
  const pick = (items: readonly FixtureItem[]) => items.filter((item) => by(item.declaredBy))
  return [
    ...pick(fixture.exchanges as readonly FixtureItem[]).map(strip('exchange')),
    ...pick(fixture.queues as readonly FixtureItem[]).map(strip('queue')),
    ...pick(fixture.bindings as readonly FixtureItem[]).map(strip('binding')),
  ]
}

const sortKey = (item: Record<string, unknown>): string => JSON.stringify(item)
const sorted = (items: Record<string, unknown>[]): Record<string, unknown>[] =>
  [...items].sort((a, b) => sortKey(a).localeCompare(sortKey(b)))

describe('the topology fixture', () => {
  it('uses the fixture’s policy', () => {
    expect(policy.schedule()).toEqual(fixture.policyScheduleMillis)
    expect(policy.brokerRungs()).toEqual(fixture.policyRungDelaysMillis)
  })

  it('declares exactly what the fixture says a consumer declares', () => {
    const declared = consumerDeclarations(fixture.sourceQueue, policy).map(asFixture)
    expect(sorted(declared)).toEqual(
      sorted(fixtureItems((by) => by === 'consumer' || by === 'both')),
    )
  })

  it('declares everything in the fixture from Topology.define().queueWithRetry()', () => {
    const topology = Topology.define()
      .exchange('orders', 'topic')
      .queueWithRetry(fixture.sourceQueue, policy)
      .bind(fixture.sourceQueue, 'orders', 'order.*')
    expect(sorted(topology.plan().map(asFixture))).toEqual(sorted(fixtureItems(() => true)))
  })

  it('declares every shared item byte-identically from the topology and from the consumer', () => {
    const fromConsumer = consumerDeclarations(fixture.sourceQueue, policy)
    const fromTopology = Topology.define().queueWithRetry(fixture.sourceQueue, policy).plan()
    for (const declaration of fromConsumer) {
      const twin = fromTopology.find(
        (d) => JSON.stringify(asFixture(d)) === JSON.stringify(asFixture(declaration)),
      )
      expect(twin && JSON.stringify(twin)).toBe(JSON.stringify(declaration))
    }
  })

  it('puts no x-queue-type on classic queues and makes the source queue quorum', () => {
    const plan = Topology.define().queueWithRetry(fixture.sourceQueue, policy).plan()
    for (const d of plan)
      if (d.kind === 'queue') expect(d.arguments).not.toHaveProperty('x-queue-type')
    expect(plan.find((d) => d.kind === 'queue' && d.name === fixture.sourceQueue)).toMatchObject({
      type: 'quorum',
    })
  })

  it('declares no retry exchange or rung for a policy that never waits in the broker', () => {
    const declared = consumerDeclarations('orders.new', RetryPolicy.exponential(5, '1s', '24h'))
    expect(
      declared.map((d) => (d.kind === 'binding' ? `${d.exchange}->${d.queue}` : d.name)),
    ).toEqual([
      'acemq.dlx',
      'orders.new.dlq',
      'orders.new.parked',
      'acemq.dlx->orders.new.dlq',
      'acemq.dlx->orders.new.parked',
    ])
    expect(
      consumerDeclarations('orders.new', RetryPolicy.fixed(4, '30s').waitInBrokerFrom(0)),
    ).toHaveLength(5)
  })
})

describe('Topology', () => {
  it('is immutable: every method returns a new topology', () => {
    const empty = Topology.define()
    const one = empty.queue('a')
    expect(empty.plan()).toEqual([])
    expect(one.plan()).toHaveLength(1)
    expect(Object.isFrozen(one)).toBe(true)
  })

  it('declares each thing once when two queues share acemq.dlx', () => {
    const plan = Topology.define().queueWithDeadLetter('a').queueWithDeadLetter('b').plan()
    expect(plan.filter((d) => d.kind === 'exchange' && d.name === 'acemq.dlx')).toHaveLength(1)
  })

  it('refuses one name declared twice with different settings', () => {
    const topology = Topology.define()
      .queue('a', { type: 'classic' })
      .queue('a', { type: 'quorum' })
    expect(() => topology.plan()).toThrow(ConfigurationError)
  })

  it('keeps an explicitly classic queue classic', () => {
    const plan = Topology.define().queueWithDeadLetter('a', { type: 'classic' }).plan()
    expect(plan.find((d) => d.kind === 'queue' && d.name === 'a')).toMatchObject({
      type: 'classic',
      arguments: { 'x-dead-letter-exchange': 'acemq.dlx', 'x-dead-letter-routing-key': 'a.dlq' },
    })
  })

  it('refuses bad names and types with errors that name the argument', () => {
    expect(() => Topology.define().exchange('amq.topic', 'topic')).toThrow(/exchange\(name\)/)
    expect(() => Topology.define().exchange('x', 'bogus' as never)).toThrow(/exchange\(type\)/)
    expect(() => Topology.define().queue('')).toThrow(ConfigurationError)
    expect(() => Topology.define().bind('q', '', 'k')).toThrow(/bind\(exchange\)/)
    expect(() =>
      Topology.define().queue('q', { arguments: { 'x-queue-type': 'classic' } }),
    ).toThrow(/options.type/)
  })
})
