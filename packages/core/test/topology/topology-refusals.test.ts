import { describe, expect, it } from 'vitest'
import { Topology } from '../../src/index.js'

// What Topology refuses, with the message it refuses with, and the order and shape of a plan
// (found by mutation testing, docs/mutation.md).

describe('exchange names', () => {
  it.each([
    ['an empty name', '', '""'],
    ['a name over 255 bytes', 'x'.repeat(256), JSON.stringify('x'.repeat(256))],
    ['a name with a control character', 'orders\u0001', '"orders\\u0001"'],
    ['a name with a newline', 'or\nders', '"or\\nders"'],
    ['a name that is not a string', 42, '42'],
  ])('refuses %s, naming the argument and the value', (_what, name, shown) => {
    expect(() => Topology.define().exchange(name as string, 'topic')).toThrow(
      `exchange(name) must be a non-empty exchange name of at most 255 bytes; got ${shown}`,
    )
  })

  it('refuses the amq. prefix, which the broker reserves', () => {
    expect(() => Topology.define().exchange('amq.orders', 'topic')).toThrow(
      'exchange(name): the amq. prefix is reserved by the broker; got "amq.orders"',
    )
  })

  it.each([
    ['the longest name, 255 bytes', 'x'.repeat(255)],
    ['a name with a space and a tilde', 'orders ~ eu'],
    ['a name just past the control characters', 'a\u0020b'],
  ])('accepts %s', (_what, name) => {
    expect(Topology.define().exchange(name, 'fanout').plan()).toStrictEqual([
      { kind: 'exchange', name, type: 'fanout', durable: true, arguments: {} },
    ])
  })

  it('refuses an exchange type RabbitMQ does not have, listing those it has', () => {
    expect(() => Topology.define().exchange('orders', 'x-delayed' as 'topic')).toThrow(
      'exchange(type) must be one of direct, topic, fanout, headers; got "x-delayed"',
    )
  })

  it('declares a direct exchange when no type is given', () => {
    expect(Topology.define().exchange('orders').plan()).toStrictEqual([
      { kind: 'exchange', name: 'orders', type: 'direct', durable: true, arguments: {} },
    ])
  })
})

describe('bindings', () => {
  it('refuses a routing key over 255 bytes, and one that is not a string', () => {
    const message = (key: unknown): string =>
      `bind(routingKey) must be a string of at most 255 bytes; got ${JSON.stringify(key)}`
    const long = 'k'.repeat(256)
    expect(() => Topology.define().bind('q', 'orders', long)).toThrow(message(long))
    expect(() => Topology.define().bind('q', 'orders', 7 as unknown as string)).toThrow(message(7))
  })

  it('accepts a routing key of exactly 255 bytes, and an empty one by default', () => {
    const key = 'k'.repeat(255)
    expect(Topology.define().bind('q', 'orders', key).plan()).toStrictEqual([
      { kind: 'binding', queue: 'q', exchange: 'orders', routingKey: key, arguments: {} },
    ])
    expect(Topology.define().bind('q', 'orders').plan()).toStrictEqual([
      { kind: 'binding', queue: 'q', exchange: 'orders', routingKey: '', arguments: {} },
    ])
  })

  it('refuses the default exchange and an exchange that is not a string', () => {
    expect(() => Topology.define().bind('q', '', 'k')).toThrow(
      'bind(exchange) must name an exchange (the default exchange cannot be bound); got ""',
    )
    expect(() => Topology.define().bind('q', 3 as unknown as string, 'k')).toThrow(
      'bind(exchange) must name an exchange (the default exchange cannot be bound); got 3',
    )
  })

  it('refuses a queue name the broker would refuse, naming bind(queue)', () => {
    expect(() => Topology.define().bind('amq.q', 'orders', 'k')).toThrow(/^bind\(queue\) /)
  })
})

describe('queues', () => {
  it('refuses a queue type other than quorum or classic', () => {
    expect(() => Topology.define().queue('q', { type: 'stream' as 'classic' })).toThrow(
      `options.type must be 'quorum' or 'classic'; got "stream"`,
    )
  })

  it('refuses x-queue-type among the arguments, naming the queue', () => {
    expect(() =>
      Topology.define().queue('q', { arguments: { 'x-queue-type': 'classic' } }),
    ).toThrow("queue 'q': set the queue type with options.type, not the x-queue-type argument")
  })

  it('refuses a bad queue name, naming it the queue name', () => {
    expect(() => Topology.define().queue('amq.q')).toThrow(
      /^queue name must not start with 'amq\.'/,
    )
  })

  it('keeps extra arguments, after the dead-letter ones, which they may override', () => {
    const [declared] = Topology.define()
      .queueWithDeadLetter('q', { arguments: { 'x-max-length': 10 } })
      .plan()
      .filter((d) => d.kind === 'queue' && d.name === 'q')
    expect(declared).toStrictEqual({
      kind: 'queue',
      name: 'q',
      type: 'quorum',
      durable: true,
      arguments: {
        'x-dead-letter-exchange': 'acemq.dlx',
        'x-dead-letter-routing-key': 'q.dlq',
        'x-max-length': 10,
      },
    })
    expect(Topology.define().queue('plain').plan()).toStrictEqual([
      { kind: 'queue', name: 'plain', type: 'quorum', durable: true, arguments: {} },
    ])
  })
})

describe('a plan', () => {
  it('lists exchanges, then queues, then bindings, each in the order declared', () => {
    const plan = Topology.define()
      .bind('q1', 'x1', 'a')
      .queue('q1')
      .exchange('x1')
      .bind('q2', 'x2', 'b')
      .queue('q2')
      .exchange('x2')
      .plan()
    expect(plan.map((d) => `${d.kind}:${d.kind === 'binding' ? d.routingKey : d.name}`)).toEqual([
      'exchange:x1',
      'exchange:x2',
      'queue:q1',
      'queue:q2',
      'binding:a',
      'binding:b',
    ])
    expect(Object.isFrozen(plan)).toBe(true)
  })

  it('keeps bindings apart that differ only in routing key, exchange or queue', () => {
    const plan = Topology.define()
      .bind('q', 'x', 'a')
      .bind('q', 'x', 'b')
      .bind('q', 'y', 'a')
      .bind('r', 'x', 'a')
      .bind('q', 'x', 'a')
      .plan()
    expect(plan).toHaveLength(4)
  })

  it('keeps an exchange and a queue of the same name apart', () => {
    expect(Topology.define().exchange('same').queue('same').plan()).toHaveLength(2)
  })

  it('names the thing declared twice differently and both settings', () => {
    expect(() =>
      Topology.define().exchange('orders', 'topic').exchange('orders', 'fanout').plan(),
    ).toThrow(
      'the topology declares exchange:orders twice with different settings: {"kind":"exchange","name":"orders","type":"topic","durable":true,"arguments":{}} and {"kind":"exchange","name":"orders","type":"fanout","durable":true,"arguments":{}}',
    )
    expect(() => Topology.define().bind('q', 'x', 'k').bind('q', 'x', 'k').plan()).not.toThrow()
  })
})
