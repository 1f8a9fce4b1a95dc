#!/usr/bin/env node
// Runs StrykerJS over the targets of mutation/targets.mjs, one after the other, and prints the
// score of each. `pnpm test:mutation --help` says how.
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { TARGETS, inputsOf } from './targets.mjs'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
process.chdir(root)

const HELP = `pnpm test:mutation [options] [target ...]

Mutation testing (StrykerJS) of core's decision code, the stores' claim / confirm / release /
purge and their batches, and the AMQP transport's batched acks. Targets: ${TARGETS.map((t) => t.name).join(', ')} (default: all).

Every run is incremental: Stryker reuses the results in mutation/incremental/<target>.json for
mutants whose code and covering tests did not change, and tests the rest. Commit the file it
updates. Reports: reports/mutation/<target>.html and .json.

  --force           test every mutant again (refreshes the incremental file)
  --changed         only the targets whose inputs (mutated files, their tests, test-support/,
                    mutation/) changed since their incremental file was committed; the others
                    keep the score in that file, and a target never run is left out (what CI
                    runs)
  --concurrency N   Stryker's concurrency (default 2: one checker and one test runner)
`

const args = process.argv.slice(2)
if (args.includes('--help') || args.includes('-h')) {
  console.log(HELP)
  process.exit(0)
}
const force = args.includes('--force')
const changedOnly = args.includes('--changed')
const concurrencyAt = args.indexOf('--concurrency')
const concurrency = concurrencyAt >= 0 ? args[concurrencyAt + 1] : undefined
const names = args.filter(
  (arg, i) => !arg.startsWith('--') && (concurrencyAt < 0 || i !== concurrencyAt + 1),
)
for (const name of names) {
  if (!TARGETS.some((t) => t.name === name)) {
    console.error(`unknown target ${name}; the targets: ${TARGETS.map((t) => t.name).join(', ')}`)
    process.exit(2)
  }
}
const chosen = names.length === 0 ? TARGETS : TARGETS.filter((t) => names.includes(t.name))

function git(...gitArgs) {
  return execFileSync('git', gitArgs, { encoding: 'utf8' }).trim()
}

/** The commit that last wrote the target's incremental file, or undefined when none did. */
function baseOf(target) {
  const file = `mutation/incremental/${target.name}.json`
  if (!existsSync(file)) return undefined
  return git('log', '-1', '--format=%H', '--', file) || undefined
}

/** Whether any input of `target` differs from `base` (committed since, or changed in the tree). */
function changedSince(base, target) {
  const inputs = inputsOf(target)
  const committed = git('diff', '--name-only', base, 'HEAD', '--', ...inputs)
  // Tracked files only: files a test run leaves behind are no change to the inputs.
  const local = git('status', '--porcelain', '--untracked-files=no', '--', ...inputs)
  return committed !== '' || local !== ''
}

/** The score of a mutation report: killed and timed-out mutants over all valid ones. */
function scoreOf(file) {
  const report = JSON.parse(readFileSync(file, 'utf8'))
  const counts = {}
  for (const { mutants } of Object.values(report.files)) {
    for (const { status } of mutants) counts[status] = (counts[status] ?? 0) + 1
  }
  const detected = (counts.Killed ?? 0) + (counts.Timeout ?? 0)
  const valid = detected + (counts.Survived ?? 0) + (counts.NoCoverage ?? 0)
  return { detected, valid, counts }
}

const results = []
let failed = false
for (const target of chosen) {
  const started = Date.now()
  const base = baseOf(target)
  if (changedOnly && !force && base === undefined) {
    // Never measured: a first run of a large target can take hours, so it is not started here.
    results.push({ target, how: 'no recorded results: run it and commit them', seconds: 0 })
    continue
  }
  if (changedOnly && !force && base !== undefined && !changedSince(base, target)) {
    results.push({ target, how: `unchanged since ${base.slice(0, 9)}`, seconds: 0 })
    continue
  }
  console.log(`\n=== mutation: ${target.name}${force ? ' (every mutant)' : ''}`)
  const run = spawnSync(
    'npx',
    [
      'stryker',
      'run',
      'mutation/stryker.config.mjs',
      ...(force ? ['--force'] : []),
      ...(concurrency === undefined ? [] : ['--concurrency', concurrency]),
    ],
    { stdio: 'inherit', env: { ...process.env, ACEMQ_MUTATION_TARGET: target.name } },
  )
  const seconds = Math.round((Date.now() - started) / 1000)
  if (run.status !== 0) failed = true
  results.push({ target, how: run.status === 0 ? 'ran' : `FAILED (exit ${run.status})`, seconds })
}

console.log(
  '\n=== mutation scores (killed + timed out / valid mutants; floor in mutation/targets.mjs)',
)
for (const { target, how, seconds } of results) {
  const file = how.startsWith('unchanged')
    ? `mutation/incremental/${target.name}.json`
    : `reports/mutation/${target.name}.json`
  let score = 'no report'
  if (existsSync(file)) {
    const { detected, valid } = scoreOf(file)
    score = `${detected}/${valid} = ${((100 * detected) / Math.max(valid, 1)).toFixed(1)} %`
  }
  console.log(
    `${target.name.padEnd(18)} ${score.padEnd(22)} floor ${target.floor} %  ${how}${seconds > 0 ? ` in ${seconds} s` : ''}`,
  )
}
process.exit(failed ? 1 : 0)
