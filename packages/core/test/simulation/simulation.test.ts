import { writeFileSync } from 'node:fs'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { regressions } from './regressions.js'
import { schedules, type Schedule } from './schedule.js'
import { runSchedule } from './simulation.js'

const FILE = 'packages/core/test/simulation/simulation.test.ts'
const runs = Number(process.env['ACEMQ_SIM_RUNS'] ?? 2_000)
const seed =
  process.env['ACEMQ_SIM_SEED'] === undefined ? undefined : Number(process.env['ACEMQ_SIM_SEED'])
const path = process.env['ACEMQ_SIM_PATH']
const slowMs =
  process.env['ACEMQ_SIM_SLOW_MS'] === undefined
    ? undefined
    : Number(process.env['ACEMQ_SIM_SLOW_MS'])
// ACEMQ_SIM_WATCH=/tmp/current.json writes each schedule there before it runs: after a run that
// hangs, the file holds the schedule that hung.
const watchFile = process.env['ACEMQ_SIM_WATCH']

/** The command that runs exactly this counterexample again. */
function replay(details: fc.RunDetails<[Schedule]>): string {
  return `ACEMQ_SIM_SEED=${details.seed} ACEMQ_SIM_PATH="${details.counterexamplePath ?? ''}" pnpm vitest run --project main ${FILE} -t 'fault schedules'`
}

describe('the engine under seeded fault schedules', () => {
  it(
    `keeps every promise through ${runs} fault schedules`,
    async () => {
      const began = performance.now()
      let count = 0
      let lastViolations: string[] = []
      const details = await fc.check(
        fc.asyncProperty(schedules, async (schedule) => {
          count++
          if (watchFile !== undefined)
            writeFileSync(watchFile, `#${count}: ${JSON.stringify(schedule)}\n`)
          const started = performance.now()
          const verdict = await runSchedule(schedule)
          const took = performance.now() - started
          // ACEMQ_SIM_SLOW_MS=2000 prints every schedule that took longer (real time).
          if (slowMs !== undefined && took > slowMs) {
            console.log(
              `slow schedule #${count}: ${took.toFixed(0)} ms, ${verdict.steps} timers: ${JSON.stringify(schedule)}`,
            )
          }
          lastViolations = verdict.violations
          return verdict.violations.length === 0
        }),
        {
          numRuns: path === undefined ? runs : 1,
          ...(seed === undefined ? {} : { seed }),
          ...(path === undefined ? {} : { path }),
          // A shrink reruns whole schedules: bounded, so a failure is reported in minutes.
          maxSkipsPerRun: 0,
          interruptAfterTimeLimit: 50 * 60_000,
          // ACEMQ_SIM_NO_SHRINK=1 reports the first failing schedule as found (a shrink of a
          // schedule that spins reruns it whole each time, for minutes).
          ...(process.env['ACEMQ_SIM_NO_SHRINK'] === undefined ? {} : { endOnFailure: true }),
        },
      )
      const seconds = ((performance.now() - began) / 1_000).toFixed(1)
      console.log(`fault schedules: ${count} run in ${seconds} s (seed ${details.seed})`)
      if (details.failed) {
        const schedule = details.counterexample?.[0]
        // Run the shrunk schedule once more, so the violations printed are its own.
        const verdict = schedule === undefined ? undefined : await runSchedule(schedule)
        throw new Error(
          [
            `a fault schedule broke a promise. Replay it with:`,
            `  ${replay(details)}`,
            ...(verdict ?? { violations: lastViolations }).violations.map((v) => `  - ${v}`),
            `schedule: ${JSON.stringify(schedule)}`,
            ...(details.errorInstance === undefined
              ? []
              : [`error: ${String(details.errorInstance)}`]),
          ].join('\n'),
        )
      }
    },
    Math.max(120_000, runs * 100),
  )
})

describe('the engine under the regression schedules', () => {
  for (const regression of regressions) {
    it(regression.name, async () => {
      const verdict = await runSchedule(regression.schedule)
      expect(verdict.violations).toEqual([])
      if (verdict.world !== undefined) regression.check?.(verdict.world)
    })
  }
})
