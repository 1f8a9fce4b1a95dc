import { describe, expect, it } from 'vitest'
import { ConfigurationError } from '@acemq/core'
import type { Declaration } from '@acemq/core/spi'
import {
  declarationFailed,
  declarationKey,
  describeDeclaration,
  encodeArguments,
  validateDeclaration,
} from '../../src/internal/declarations.js'

const rung: Declaration = {
  kind: 'queue',
  name: 'orders.retry.40s',
  type: 'classic',
  durable: true,
  arguments: {
    'x-message-ttl': 40_000,
    'x-dead-letter-exchange': 'acemq.retry',
    'x-dead-letter-routing-key': 'orders',
  },
}

describe('declarations', () => {
  it('encodes integer arguments as 64-bit longs and passes everything else through', () => {
    expect(
      encodeArguments({
        'x-message-ttl': 40_000,
        'x-max-length': 1,
        typed: { '!': 'int', value: 3 },
        ratio: 0.5,
        name: 'acemq.dlx',
        flag: true,
        absent: undefined,
      }),
    ).toEqual({
      'x-message-ttl': { '!': 'long', value: 40_000 },
      'x-max-length': { '!': 'long', value: 1 },
      typed: { '!': 'int', value: 3 },
      ratio: 0.5,
      name: 'acemq.dlx',
      flag: true,
    })
  })

  it('keys declarations by what goes on the wire, whatever the argument order', () => {
    const reordered: Declaration = {
      ...rung,
      arguments: {
        'x-dead-letter-routing-key': 'orders',
        'x-dead-letter-exchange': 'acemq.retry',
        'x-message-ttl': { '!': 'long', value: 40_000 },
      },
    }
    expect(declarationKey(reordered)).toBe(declarationKey(rung))
    expect(declarationKey({ ...rung, type: 'quorum' })).not.toBe(declarationKey(rung))
  })

  it('describes a declaration for error messages', () => {
    expect(describeDeclaration(rung)).toBe(
      `queue 'orders.retry.40s' (classic, durable, arguments {"x-message-ttl":40000,"x-dead-letter-exchange":"acemq.retry","x-dead-letter-routing-key":"orders"})`,
    )
    expect(
      describeDeclaration({
        kind: 'binding',
        queue: 'q',
        exchange: 'x',
        routingKey: 'k',
        arguments: {},
      }),
    ).toBe("binding of queue 'q' to exchange 'x' with routing key 'k'")
  })

  it('names the field and value of a malformed declaration', () => {
    expect(() => validateDeclaration({ ...rung, name: '' }, 2)).toThrow(
      /declarations\[2\]\.name must not be empty/,
    )
    expect(() =>
      validateDeclaration(
        { kind: 'exchange', name: 'x', type: 'fan' as 'fanout', durable: true, arguments: {} },
        0,
      ),
    ).toThrow("declarations[0].type must be one of direct, topic, fanout, headers; got 'fan'")
    expect(() => validateDeclaration({ kind: 'table' } as unknown as Declaration, 1)).toThrow(
      ConfigurationError,
    )
    expect(() =>
      validateDeclaration({ ...rung, arguments: { 'x-queue-type': 'quorum' } }, 0),
    ).toThrow(/must not set x-queue-type/)
    expect(() =>
      validateDeclaration({ ...rung, type: 'quorum', arguments: { 'x-queue-type': 'quorum' } }, 0),
    ).not.toThrow()
  })

  it('explains a PRECONDITION_FAILED refusal', () => {
    const refusal = Object.assign(new Error('PRECONDITION_FAILED - inequivalent arg'), {
      code: 406,
    })
    const error = declarationFailed(rung, refusal)
    expect(error.code).toBe('ACEMQ_DECLARATION_FAILED')
    expect(error.message).toContain("queue 'orders.retry.40s'")
    expect(error.message).toContain('cannot change once it exists')
    expect(error.cause).toBe(refusal)
  })
})
