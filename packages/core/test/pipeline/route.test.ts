import { expect, it } from 'vitest'
import { ROUTE_HEADERS, readRoute, routeHeaders } from '@acemq/core/spi'

// The family's route headers (docs/design.md §15), read leniently and written as the Java and
// .NET libraries write them.

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text)

it('names the three route headers as the family writes them', () => {
  expect(ROUTE_HEADERS).toEqual({
    route: 'x-acemq-route',
    position: 'x-acemq-route-position',
    runId: 'x-acemq-route-id',
  })
  expect(Object.isFrozen(ROUTE_HEADERS)).toBe(true)
})

it('reads no route from no headers, no route header, or a route of blank entries only', () => {
  expect(readRoute(undefined)).toBeUndefined()
  expect(readRoute({})).toBeUndefined()
  expect(readRoute({ 'x-acemq-route-position': 1, 'x-acemq-route-id': 'run-1' })).toBeUndefined()
  expect(readRoute({ 'x-acemq-route': '' })).toBeUndefined()
  expect(readRoute({ 'x-acemq-route': ' , ,' })).toBeUndefined()
})

it('reads the route as text or UTF-8 bytes, blank entries dropped and the rest trimmed', () => {
  expect(
    readRoute({
      'x-acemq-route': ' a , ,b,c ',
      'x-acemq-route-position': 2,
      'x-acemq-route-id': 'run-1',
    }),
  ).toEqual({ steps: ['a', 'b', 'c'], position: 2, runId: 'run-1' })
  expect(
    readRoute({
      'x-acemq-route': bytes('reserve,charge'),
      'x-acemq-route-position': bytes('1'),
      'x-acemq-route-id': bytes('run-2'),
    }),
  ).toEqual({ steps: ['reserve', 'charge'], position: 1, runId: 'run-2' })
})

it('reads the position as an integer of any width or a decimal string, and 0 when missing, unreadable or negative', () => {
  const route = (position: unknown): number | undefined =>
    readRoute({ 'x-acemq-route': 'a,b,c', 'x-acemq-route-position': position as number })?.position
  expect(route({ '!': 'int', value: 1 })).toBe(1)
  expect(route({ '!': 'long', value: 2n })).toBe(2)
  expect(route('2')).toBe(2)
  expect(route(0)).toBe(0)
  expect(route(undefined)).toBe(0)
  expect(route('two')).toBe(0)
  expect(route(1.5)).toBe(0)
  expect(route(-1)).toBe(0)
  expect(route(-2)).toBe(0)
})

it('reads no run id when the message carries none', () => {
  expect(readRoute({ 'x-acemq-route': 'a' })).toEqual({
    steps: ['a'],
    position: 0,
    runId: undefined,
  })
})

it('writes the route comma-joined, the position as a signed 32-bit int, the run id as text', () => {
  expect(routeHeaders({ steps: ['a', 'b', 'a'], position: 2, runId: 'run-1' })).toEqual({
    'x-acemq-route': 'a,b,a',
    'x-acemq-route-position': { '!': 'int', value: 2 },
    'x-acemq-route-id': 'run-1',
  })
})

it('reads back what it writes', () => {
  const written = { steps: ['reserve', 'charge', 'ship'], position: 1, runId: 'run-3' }
  expect(readRoute(routeHeaders(written))).toEqual(written)
})
