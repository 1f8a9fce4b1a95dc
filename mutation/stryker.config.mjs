// StrykerJS configuration for one mutation target (mutation/targets.mjs), chosen with
// ACEMQ_MUTATION_TARGET. Run it through `pnpm test:mutation`, which takes the targets in turn.
import { TARGETS } from './targets.mjs'

const name = process.env['ACEMQ_MUTATION_TARGET']
const target = TARGETS.find((t) => t.name === name)
if (target === undefined) {
  throw new Error(
    `ACEMQ_MUTATION_TARGET must name a target (${TARGETS.map((t) => t.name).join(', ')}); got ${name}`,
  )
}

// The tests go to Vitest through the environment (mutation/vitest.config.ts reads it), not
// through Stryker's testFiles: with testFiles, Stryker 9.6.1 activates a static mutant (one in
// code that runs when its module loads) only after the module has loaded, and reports it
// survived (stryker-js issue 6144). The runner processes inherit this environment.
process.env['ACEMQ_MUTATION_TESTS'] = JSON.stringify(target.testFiles)
// Tests of those files the target leaves out (mutation/leave-out.ts skips them by name), and the
// knobs its tests read (the simulation's schedule count and seed).
process.env['ACEMQ_MUTATION_LEAVE_OUT'] = JSON.stringify(target.leaveOut ?? [])
Object.assign(process.env, target.env ?? {})

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  plugins: ['@stryker-mutator/vitest-runner', '@stryker-mutator/typescript-checker'],
  testRunner: 'vitest',
  vitest: { configFile: 'mutation/vitest.config.ts', related: false },
  checkers: ['typescript'],
  tsconfigFile: 'mutation/tsconfig.json',
  typescriptChecker: { prioritizePerformanceOverAccuracy: true },
  coverageAnalysis: 'perTest',
  mutate: typeof target.mutate === 'function' ? target.mutate() : target.mutate,
  concurrency: Number(process.env['ACEMQ_MUTATION_CONCURRENCY'] ?? 2),
  timeoutMS: target.timeoutMS ?? 10_000,
  // Always incremental: mutants whose code and covering tests did not change keep their result
  // from the committed file; `--force` tests them all again.
  incremental: true,
  incrementalFile: `mutation/incremental/${target.name}.json`,
  reporters: ['clear-text', 'progress-append-only', 'html', 'json'],
  htmlReporter: { fileName: `reports/mutation/${target.name}.html` },
  jsonReporter: { fileName: `reports/mutation/${target.name}.json` },
  clearTextReporter: { allowColor: false, logTests: false, reportScoreTable: true },
  thresholds: { high: 90, low: 85, break: target.floor },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
  ignorePatterns: ['reports', 'bench/results', 'docs/api', '.turbo', '**/dist', 'coverage'],
}
