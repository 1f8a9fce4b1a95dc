import { describe, expect, test } from 'vitest'
import {
  AceMqError,
  ClosedError,
  ConfigurationError,
  ConnectionBlockedError,
  FatalError,
  PublishFailedError,
  PublishingPausedError,
  UnroutableError,
  abortError,
  describeError,
} from '../src/errors.js'

describe('the error classes', () => {
  test.each<[string, () => AceMqError, string]>([
    ['AceMqError', () => new AceMqError('boom'), 'ACEMQ_ERROR'],
    [
      'PublishingPausedError',
      () => new PublishingPausedError('orders', 'order.placed'),
      'ACEMQ_PUBLISHING_PAUSED',
    ],
    [
      'ConnectionBlockedError',
      () => new ConnectionBlockedError('low on memory'),
      'ACEMQ_CONNECTION_BLOCKED',
    ],
    ['UnroutableError', () => new UnroutableError('', 'nowhere'), 'ACEMQ_UNROUTABLE'],
    ['PublishFailedError', () => new PublishFailedError('nacked'), 'ACEMQ_PUBLISH_FAILED'],
    ['FatalError', () => new FatalError('bad order'), 'ACEMQ_FATAL'],
    ['ConfigurationError', () => new ConfigurationError('bad option'), 'ACEMQ_CONFIGURATION'],
    ['ClosedError', () => new ClosedError(), 'ACEMQ_CLOSED'],
  ])('%s has its own name, a stable code, and is an AceMqError', (name, make, code) => {
    const error = make()
    expect(error).toBeInstanceOf(Error)
    expect(error).toBeInstanceOf(AceMqError)
    expect(error.name).toBe(name)
    expect(error.code).toBe(code)
    expect(error.message).not.toBe('')
    expect(error.stack).toContain(name)
  })

  test('an AceMqError takes a custom code', () => {
    expect(new AceMqError('x', { code: 'ACEMQ_DECODE' }).code).toBe('ACEMQ_DECODE')
  })

  test('the cause is kept when given and absent otherwise', () => {
    const cause = new Error('socket closed')
    expect(new PublishFailedError('not confirmed', { cause }).cause).toBe(cause)
    expect(new FatalError('no', { cause }).cause).toBe(cause)
    expect(new ConfigurationError('no', { cause }).cause).toBe(cause)
    expect(new AceMqError('no', { cause }).cause).toBe(cause)
    expect('cause' in new AceMqError('no')).toBe(false)
  })

  test('the subclasses carry their context', () => {
    const paused = new PublishingPausedError('orders', 'order.placed')
    expect([paused.exchange, paused.routingKey]).toEqual(['orders', 'order.placed'])
    expect(paused.message).toContain("exchange 'orders'")
    expect(new ConnectionBlockedError('low on disk').reason).toBe('low on disk')
    const unroutable = new UnroutableError('', 'nowhere')
    expect(unroutable.replyText).toBe('NO_ROUTE')
    expect(unroutable.message).toContain('(default)')
  })

  test('a closed error has a default message', () => {
    expect(new ClosedError().message).toBe('the AceMQ connection is closed')
  })
})

describe('abortError', () => {
  test('makes an AbortError', () => {
    const error = abortError()
    expect(error.name).toBe('AbortError')
  })

  test("reuses the signal's reason when it already is an AbortError", () => {
    const controller = new AbortController()
    controller.abort()
    expect(abortError(controller.signal)).toBe(controller.signal.reason)
  })

  test('makes a fresh AbortError when the reason is something else', () => {
    const controller = new AbortController()
    controller.abort('shutting down')
    expect(abortError(controller.signal).name).toBe('AbortError')
  })
})

describe('describeError', () => {
  test.each<[unknown, string]>([
    [new Error('boom'), 'boom'],
    [new TypeError(''), 'TypeError'],
    ['plain text', 'plain text'],
    [{ code: 42 }, '{"code":42}'],
    [undefined, 'undefined'],
    [10n, '10'],
  ])('renders %s as one line', (input, expected) => {
    expect(describeError(input)).toBe(expected)
  })

  test('renders a cyclic object without throwing', () => {
    const cyclic: Record<string, unknown> = {}
    cyclic['self'] = cyclic
    expect(describeError(cyclic)).toBe('[object Object]')
  })
})
