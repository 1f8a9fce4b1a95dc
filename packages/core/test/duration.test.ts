import { describe, expect, test } from 'vitest'
import { formatDuration, toMillis, type Duration } from '../src/duration.js'
import { ConfigurationError } from '../src/errors.js'

describe('toMillis', () => {
  test.each([
    [0, 0],
    [250, 250],
    [1.4, 1],
    [1.5, 2],
  ])('takes the number %s as %s milliseconds', (input, expected) => {
    expect(toMillis(input)).toBe(expected)
  })

  test.each<[Duration, number]>([
    ['250ms', 250],
    ['30s', 30_000],
    ['5m', 300_000],
    ['6h', 21_600_000],
    ['1d', 86_400_000],
    ['0s', 0],
  ])('reads %s as %s milliseconds', (input, expected) => {
    expect(toMillis(input)).toBe(expected)
  })

  test.each<[Duration, number]>([
    ['1.5s', 1_500],
    ['0.5m', 30_000],
    ['2.25h', 8_100_000],
    ['1.5ms', 2],
  ])('reads the decimal %s as %s milliseconds', (input, expected) => {
    expect(toMillis(input)).toBe(expected)
  })

  test.each([-1, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY])(
    'refuses the number %s, naming the argument',
    (input) => {
      expect(() => toMillis(input, 'initialDelay')).toThrow(ConfigurationError)
      expect(() => toMillis(input, 'initialDelay')).toThrow(
        new RegExp(`^initialDelay must be .*; got ${String(input)}$`),
      )
    },
  )

  test.each(['10x', '', '-1s', 's', '1 s s', '1e3s', 'ten seconds', '1.s'])(
    'refuses the string %j, naming the argument and quoting the value',
    (input) => {
      const attempt = (): number => toMillis(input as Duration, 'threshold')
      expect(attempt).toThrow(ConfigurationError)
      expect(attempt).toThrow(`threshold must be milliseconds or a number with a unit`)
      expect(attempt).toThrow(`got ${JSON.stringify(input)}`)
    },
  )

  test('names the argument "duration" when none is given', () => {
    expect(() => toMillis(-5)).toThrow(/^duration must be/)
  })

  test('refuses values that are neither numbers nor strings', () => {
    expect(() => toMillis(null as unknown as Duration, 'delay')).toThrow(ConfigurationError)
    expect(() => toMillis({} as unknown as Duration, 'delay')).toThrow(/^delay must be/)
  })
})

describe('formatDuration', () => {
  test.each([
    [0, '0ms'],
    [1, '1ms'],
    [500, '500ms'],
    [1_500, '1500ms'],
    [1_000, '1s'],
    [30_000, '30s'],
    [90_000, '90s'],
    [300_000, '5m'],
    [5_400_000, '90m'],
    [3_600_000, '1h'],
    [7_200_000, '2h'],
    [86_400_000, '24h'],
  ])('renders %s ms as %s', (ms, expected) => {
    expect(formatDuration(ms)).toBe(expected)
  })

  test.each<Duration>(['250ms', '30s', '90s', '5m', '2h'])(
    'reads back what it renders (%s)',
    (duration) => {
      const ms = toMillis(duration)
      expect(toMillis(formatDuration(ms) as Duration)).toBe(ms)
    },
  )
})
