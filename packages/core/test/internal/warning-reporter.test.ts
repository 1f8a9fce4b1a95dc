import { describe, expect, it } from 'vitest'
import { AceMqError } from '../../src/errors.js'
import { warningReporter } from '../../src/internal/warning-reporter.js'

function recorder(start = 0) {
  let clock = start
  const printed: { message: string; code: string }[] = []
  const report = warningReporter({
    intervalMs: 60_000,
    now: () => clock,
    emit: (message, code) => printed.push({ message, code }),
  })
  return {
    report,
    printed,
    advance: (ms: number) => {
      clock += ms
    },
  }
}

const missingTable = new AceMqError('the idempotency table "acemq_idempotency" does not exist', {
  code: 'ACEMQ_STORE_TABLE_MISSING',
})

describe('the default onError', () => {
  it('prints a failure the first time, with its context and code', () => {
    const { report, printed } = recorder()
    report(missingTable, 'the idempotency store could not claim message m-1')
    expect(printed).toStrictEqual([
      {
        message:
          'the idempotency store could not claim message m-1: the idempotency table "acemq_idempotency" does not exist',
        code: 'ACEMQ_STORE_TABLE_MISSING',
      },
    ])
  })

  it('prints the same failure for every message once a minute, with how many it held back', () => {
    const { report, printed, advance } = recorder()
    for (let i = 0; i < 1_000; i++) {
      report(missingTable, `the idempotency store could not claim message m-${i}`)
      advance(100)
    }
    expect(printed.map((p) => p.message)).toStrictEqual([
      'the idempotency store could not claim message m-0: the idempotency table "acemq_idempotency" does not exist',
      'the idempotency store could not claim message m-600: the idempotency table "acemq_idempotency" does not exist (599 more like it since the last warning)',
    ])
  })

  it('prints each distinct failure, and sums up the kinds past ten in an interval', () => {
    const { report, printed, advance } = recorder()
    for (let i = 0; i < 15; i++) report(new Error(`timeout claiming m-${i}`), 'claim')
    expect(printed).toHaveLength(10)
    expect(printed[0]).toStrictEqual({
      message: 'claim: timeout claiming m-0',
      code: 'ACEMQ_FAILURE',
    })
    advance(60_000)
    report(new Error('the connection was lost'), 'recovering')
    expect(printed.slice(10).map((p) => p.message)).toStrictEqual([
      '5 more failure(s) of other kinds in the last 60 s were not printed (at most 10 kinds are printed per interval)',
      'recovering: the connection was lost',
    ])
  })

  it('prints through process.emitWarning as an AceMqWarning by default', async () => {
    const warnings: Error[] = []
    const onWarning = (warning: Error): void => void warnings.push(warning)
    process.on('warning', onWarning)
    try {
      warningReporter()(missingTable, 'claiming m-1')
      await new Promise((resolve) => setImmediate(resolve))
    } finally {
      process.off('warning', onWarning)
    }
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toMatchObject({
      name: 'AceMqWarning',
      code: 'ACEMQ_STORE_TABLE_MISSING',
      message: 'claiming m-1: the idempotency table "acemq_idempotency" does not exist',
    })
  })
})
