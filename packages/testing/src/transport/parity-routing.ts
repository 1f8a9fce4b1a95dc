import { beforeEach, describe, expect, it } from 'vitest'
import { ErrorCodes, type Headers, type HeaderValue } from '@acemq/core'
import { type Transport } from '@acemq/core/spi'
import { long, type ParityKit } from './parity-kit.js'

/** Routing on the four exchange types, alternate exchanges, the `amq.*` exchanges, and publishing's refusals. */
export function routingParity(kit: ParityKit): void {
  const { target, fresh, exchange, queue, binding, publish, bodies, readyIs, refusal } = kit
  let t: Transport
  beforeEach(() => {
    t = kit.transport()
  })

  describe('routing', () => {
    it('routes a direct exchange on the exact routing key', async () => {
      const x = fresh('direct')
      const [a, b] = [fresh('q'), fresh('q')]
      await t.declare([
        exchange(x, 'direct'),
        queue(a),
        queue(b),
        binding(a, x, 'orders.placed'),
        binding(b, x, 'orders'),
      ])
      await publish(x, 'orders.placed', 'one')
      await publish(x, 'orders', 'two')
      await expect(publish(x, 'orders.*', 'three')).rejects.toMatchObject({
        code: ErrorCodes.UNROUTABLE,
      })
      expect(await bodies(a, 1)).toEqual(['one'])
      expect(await bodies(b, 1)).toEqual(['two'])
    })

    it('routes a topic exchange on * (one word) and # (zero or more words)', async () => {
      const x = fresh('topic')
      const [star, hash, bare] = [fresh('q'), fresh('q'), fresh('q')]
      await t.declare([
        exchange(x, 'topic'),
        queue(star),
        queue(hash),
        queue(bare),
        binding(star, x, 'order.*'),
        binding(hash, x, 'order.#'),
        binding(bare, x, '#.eu'),
      ])
      for (const key of ['order', 'order.placed', 'order.placed.eu', 'eu'])
        await publish(x, key, key)
      await expect(publish(x, 'invoice.sent', 'x')).rejects.toMatchObject({
        code: ErrorCodes.UNROUTABLE,
      })
      expect(await bodies(star, 1)).toEqual(['order.placed'])
      expect(await bodies(hash, 3)).toEqual(['order', 'order.placed', 'order.placed.eu'])
      expect(await bodies(bare, 2)).toEqual(['order.placed.eu', 'eu'])
    })

    it('routes a fanout exchange to every bound queue whatever the routing key', async () => {
      const x = fresh('fanout')
      const [a, b] = [fresh('q'), fresh('q')]
      await t.declare([
        exchange(x, 'fanout'),
        queue(a),
        queue(b),
        binding(a, x, 'ignored'),
        binding(b, x, ''),
      ])
      await publish(x, 'anything', 'one')
      expect(await bodies(a, 1)).toEqual(['one'])
      expect(await bodies(b, 1)).toEqual(['one'])
    })

    it('routes a headers exchange on x-match all (the default), any, all-with-x and any-with-x, comparing values as RabbitMQ does', async () => {
      const x = fresh('headers')
      const bindings: Record<string, Record<string, HeaderValue>> = {
        all: { 'x-match': 'all', a: 1, b: 'x' },
        any: { 'x-match': 'any', a: 1, b: 'x' },
        byDefault: { a: long(1) },
        xKeysIgnored: { 'x-match': 'all', 'x-foo': 'bar' },
        xKeysIgnoredAny: { 'x-match': 'any', 'x-foo': 'bar' },
        allWithX: { 'x-match': 'all-with-x', 'x-foo': 'bar', a: 1 },
        anyWithX: { 'x-match': 'any-with-x', 'x-foo': 'bar', c: 3 },
        bytes: { s: Buffer.from('hi') },
        number: { n: 2 },
        presence: { v: null },
        boolean: { t: true },
        array: { arr: [1, 'a'] },
        timestamp: { ts: { '!': 'timestamp', value: 5 } },
        float: { f: { '!': 'float', value: 0.1 } },
        emptyAny: { 'x-match': 'any' },
      }
      const queues = Object.fromEntries(Object.keys(bindings).map((key) => [key, fresh(key)]))
      await t.declare([
        exchange(x, 'headers'),
        ...Object.values(queues).map((q) => queue(q)),
        ...Object.entries(bindings).map(([key, args]) =>
          binding(queues[key] as string, x, '', args),
        ),
      ])
      const messages: [string, Headers][] = [
        ['a1bx', { a: 1, b: 'x' }],
        ['a1', { a: 1 }],
        ['a1long', { a: long(1) }],
        ['a1int', { a: { '!': 'int', value: 1 } }],
        ['a1text', { a: '1' }],
        ['bBytes', { a: 2, b: Buffer.from('x') }],
        ['xfoo', { 'x-foo': 'bar' }],
        ['xfooA', { 'x-foo': 'bar', a: 1 }],
        ['c3', { 'x-foo': 'baz', c: 3 }],
        ['sText', { s: 'hi' }],
        ['n2double', { n: { '!': 'double', value: 2 } }],
        ['n2.5', { n: 2.5 }],
        ['vAny', { v: 'anything' }],
        ['vNull', { v: null }],
        ['t1', { t: 1 }],
        ['tTrue', { t: true }],
        ['arr', { arr: [1, 'a'] }],
        ['arrLong', { arr: [long(1), 'a'] }],
        ['ts5', { ts: 5 }],
        ['f0.1', { f: 0.1 }],
        ['f0.1float', { f: { '!': 'float', value: 0.1 } }],
        ['none', {}],
      ]
      for (const [body, headers] of messages) await publish(x, '', body, { headers })
      const expected: Record<string, string[]> = {
        all: ['a1bx'],
        any: ['a1bx', 'a1', 'a1long', 'a1int', 'bBytes', 'xfooA'],
        byDefault: ['a1bx', 'a1', 'a1long', 'a1int', 'xfooA'],
        xKeysIgnored: messages.map(([body]) => body),
        xKeysIgnoredAny: [],
        allWithX: ['xfooA'],
        anyWithX: ['xfoo', 'xfooA', 'c3'],
        bytes: ['sText'],
        number: ['n2double'],
        presence: ['vAny', 'vNull'],
        boolean: ['tTrue'],
        array: ['arr'],
        timestamp: ['ts5'],
        float: ['f0.1float'],
        emptyAny: [],
      }
      const routed: Record<string, string[]> = {}
      for (const [key, bodiesExpected] of Object.entries(expected)) {
        const q = queues[key] as string
        await readyIs(q, bodiesExpected.length)
        routed[key] = bodiesExpected.length === 0 ? [] : await bodies(q, bodiesExpected.length)
      }
      expect(routed).toEqual(expected)
    })

    it('keeps two bindings that differ only in their arguments, and re-binding the same arguments changes nothing', async () => {
      const x = fresh('headers')
      const q = fresh('q')
      await t.declare([
        exchange(x, 'headers'),
        queue(q),
        binding(q, x, 'k', { a: 1 }),
        binding(q, x, 'k', { a: 1 }),
        binding(q, x, 'k', { b: 1 }),
      ])
      await publish(x, 'k', 'a', { headers: { a: 1 } })
      await publish(x, 'k', 'b', { headers: { b: 1 } })
      await publish(x, 'k', 'both', { headers: { a: 1, b: 1 } })
      await expect(publish(x, 'k', 'c', { headers: { c: 1 } })).rejects.toMatchObject({
        code: ErrorCodes.UNROUTABLE,
      })
      expect(await bodies(q, 3)).toEqual(['a', 'b', 'both'])
    })

    it('delivers a message once to a queue that two bindings match', async () => {
      const x = fresh('direct')
      const q = fresh('q')
      await t.declare([
        exchange(x, 'direct'),
        queue(q),
        binding(q, x, 'k'),
        binding(q, x, 'k', { tag: 'other' }),
      ])
      await publish(x, 'k', 'once')
      expect(await bodies(q, 1)).toEqual(['once'])
    })

    it('routes what no binding takes to the alternate exchange, and returns it when that takes nothing either', async () => {
      const [x, ae, lost] = [fresh('direct'), fresh('fanout'), fresh('direct')]
      const [bound, spare] = [fresh('q'), fresh('q')]
      await t.declare([
        exchange(ae, 'fanout'),
        exchange(x, 'direct', { 'alternate-exchange': ae }),
        exchange(lost, 'direct', { 'alternate-exchange': fresh('missing') }),
        queue(bound),
        queue(spare),
        binding(bound, x, 'k'),
        binding(spare, ae, ''),
      ])
      await publish(x, 'k', 'bound')
      await publish(x, 'other', 'spare')
      await expect(publish(lost, 'k', 'x')).rejects.toMatchObject({ code: ErrorCodes.UNROUTABLE })
      expect(await bodies(bound, 1)).toEqual(['bound'])
      expect(await bodies(spare, 1)).toEqual(['spare'])
    })

    it('refuses a headers binding whose x-match is not all, any, all-with-x or any-with-x', async () => {
      const x = fresh('headers')
      const q = fresh('q')
      await t.declare([exchange(x, 'headers'), queue(q)])
      for (const xMatch of ['some', 1]) {
        const error = await refusal(t.declare([binding(q, x, '', { 'x-match': xMatch })]))
        expect(error.message).toMatch(/PRECONDITION_FAILED/)
      }
      await t.declare([binding(q, x, '', { 'x-match': 'any', a: 1 })])
    })

    it('has the predeclared amq.* exchanges, refuses new amq.* names and bindings to the default exchange', async () => {
      const q = fresh('q')
      await t.declare([
        queue(q),
        binding(q, 'amq.direct', q),
        binding(q, 'amq.topic', `${q}.#`),
        binding(q, 'amq.fanout', ''),
        binding(q, 'amq.headers', '', { k: q }),
        binding(q, 'amq.match', '', { k: q }),
        exchange('amq.direct', 'direct'),
      ])
      await publish('amq.direct', q, 'direct')
      await publish('amq.topic', `${q}.x`, 'topic')
      await publish('amq.headers', '', 'headers', { headers: { k: q } })
      expect(await bodies(q, 3)).toEqual(['direct', 'topic', 'headers'])
      const reserved = await refusal(t.declare([exchange(`amq.${fresh('mine')}`, 'direct')]))
      expect(reserved.message).toMatch(/ACCESS_REFUSED/)
      const defaultExchange = await refusal(t.declare([binding(q, '', 'k')]))
      expect(defaultExchange.message).toMatch(/ACCESS_REFUSED/)
    })
  })

  describe('publishing', () => {
    it('returns a mandatory message no queue takes, and drops a non-mandatory one silently', async () => {
      const missing = fresh('missing')
      await expect(publish('', missing, 'x')).rejects.toMatchObject({
        code: ErrorCodes.UNROUTABLE,
      })
      await publish('', missing, 'x', { mandatory: false })
      expect(await target.readyCount(t, missing)).toBeUndefined()
    })

    it('fails a publish to an exchange that does not exist, and the next publish goes through', async () => {
      const q = fresh('q')
      await t.declare([queue(q)])
      await expect(publish(fresh('no-such-exchange'), 'k', 'x')).rejects.toMatchObject({
        code: ErrorCodes.EXCHANGE_NOT_FOUND,
      })
      await publish('', q, 'after')
      expect(await bodies(q, 1)).toEqual(['after'])
    })
  })
}
