// `pnpm bench`: every comparison of issue 9, interleaved, medians and ratios to
// bench/results/latest.json and BENCHMARKS.md. `BENCH_QUICK=1` is a smoke test with tiny sizes;
// `--node 24` (or ACEMQ_BENCH_NODE) runs it on another Node, into results/node-24.json.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { COMPARISONS } from './comparisons/index.js'
import { Admin } from './internal/broker.js'
import { QUICK, forcedProfiles, selectedComparisons, sizes } from './internal/config.js'
import { describeMachine } from './internal/machine.js'
import { chosenNode, relaunchOn, runningMajor, writeNodeVersions } from './internal/node-choice.js'
import { writeMarkdown, type Report } from './internal/report.js'
import { fmt } from './internal/stats.js'

const BENCH = fileURLToPath(new URL('..', import.meta.url))
const RESULTS = path.join(BENCH, 'results')
const BENCHMARKS_MD = path.join(BENCH, '..', 'BENCHMARKS.md')
const CHARTS = path.join(BENCH, '..', 'benchmarks')

const SKELETON = `# Benchmarks

\`@acemq\` side by side with the clients it wraps: raw amqplib, rascal, and each idempotency
store's own statements. Produced by \`pnpm bench\` (the private \`bench/\` package, see
[bench/README.md](bench/README.md)); the results section below is regenerated on every run.
`

/**
 * BENCH_TAG=name writes results/name.json and leaves BENCHMARKS.md alone (an experiment, e.g.
 * BENCH_ACEMQ_NAGLE=1); a quick run is tagged `quick`; a run on a chosen Node, `node-<major>`
 * (quick or not: its sizes are in the file and the table says which).
 */
function runTag(node: string | undefined): string {
  const tag =
    process.env['BENCH_TAG'] ?? (node !== undefined ? `node-${node}` : QUICK ? 'quick' : 'latest')
  if (!/^[\w.-]+$/.test(tag)) throw new Error(`BENCH_TAG must be a plain file name; got ${tag}`)
  return tag
}

function log(line: string): void {
  const seconds = ((Date.now() - started) / 1000).toFixed(0).padStart(4)
  console.log(`[${seconds}s] ${line}`)
}

const started = Date.now()

async function main(): Promise<void> {
  const node = chosenNode(process.argv.slice(2), process.env)
  if (node !== undefined && node !== runningMajor()) {
    log(`relaunching on Node ${node}`)
    process.exitCode = await relaunchOn(node)
    return
  }
  if (process.env['BENCH_RENDER'] === '1') {
    // Re-render BENCHMARKS.md from results/latest.json without measuring anything.
    const report = JSON.parse(fs.readFileSync(path.join(RESULTS, 'latest.json'), 'utf8')) as Report
    writeMarkdown(BENCHMARKS_MD, report, SKELETON)
    writeNodeVersions(BENCHMARKS_MD, RESULTS)
    log(
      `rendered ${path.relative(process.cwd(), BENCHMARKS_MD)} from results/latest.json and node-*.json`,
    )
    return
  }
  const selected = selectedComparisons()
  const forced = forcedProfiles()
  const runSizes = sizes()
  fs.mkdirSync(path.join(RESULTS, 'profiles'), { recursive: true })
  log(
    `${QUICK ? 'quick smoke run' : 'full run'} on Node ${process.versions.node}: ${selected.join(', ')}; ${runSizes.rounds} rounds`,
  )
  const admin = await Admin.open()
  const machine = await describeMachine(admin.serverVersion)
  const tag = runTag(node)
  const stamp = (): string =>
    `commit ${machine.commit}${machine.uncommitted.length > 0 ? ' + uncommitted changes' : ''}, ${new Date().toISOString().slice(0, 16)}Z, 1-min load average ${fmt(os.loadavg()[0] ?? 0, 2)} (${fmt(machine.loadStart, 2)} at the start of the run), ${machine.cpus} CPUs`
  const comparisons: Report['comparisons'][number][] = []
  try {
    for (const comparison of COMPARISONS.filter((c) => selected.includes(c.id))) {
      log(comparison.title)
      const t0 = Date.now()
      const result = await comparison.run({
        admin,
        sizes: runSizes,
        log,
        profileDir: path.join(RESULTS, 'profiles'),
        forceProfile: forced.has(comparison.id),
        profileOnMiss: !QUICK,
        recover: async (error) => {
          console.error(error)
          await admin.waitForBroker()
        },
        stamp,
        writeChart: (name, svg) => {
          const target =
            tag === 'latest' ? path.join(CHARTS, name) : path.join(RESULTS, `${tag}-${name}`)
          fs.mkdirSync(path.dirname(target), { recursive: true })
          fs.writeFileSync(target, svg)
          log(`  wrote ${path.relative(process.cwd(), target)}`)
        },
      })
      const seconds = (Date.now() - t0) / 1000
      comparisons.push({ ...result, seconds, ranAt: new Date().toISOString() })
      for (const section of result.sections) {
        for (const c of section.checks) {
          log(
            `  ${c.met ? 'MET   ' : 'MISSED'} ${c.description}: ${fmt(c.ratio)} (target ${c.op} ${c.target})`,
          )
        }
      }
      log(`  ${comparison.id} took ${seconds.toFixed(0)} s`)
    }
  } finally {
    await admin.close()
  }
  machine.loadEnd = os.loadavg()[0] ?? 0

  const official = tag === 'latest'
  const file = path.join(RESULTS, `${tag}.json`)
  // A partial run (BENCH_ONLY) keeps the other comparisons of the last report with that tag.
  let kept: Report['comparisons'] = []
  if (!QUICK && fs.existsSync(file)) {
    const previous = JSON.parse(fs.readFileSync(file, 'utf8')) as Report
    kept = previous.comparisons.filter((c) => !comparisons.some((n) => n.id === c.id))
  }
  const order = COMPARISONS.map((c) => c.id as string)
  const report: Report = {
    generatedAt: new Date().toISOString(),
    quick: QUICK,
    machine,
    sizes: runSizes,
    seconds: (Date.now() - started) / 1000,
    ran: comparisons.map((c) => c.id),
    comparisons: [...kept, ...comparisons].sort(
      (a, b) => order.indexOf(a.id) - order.indexOf(b.id),
    ),
  }
  fs.writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`)
  log(`wrote ${path.relative(process.cwd(), file)}`)
  if (tag === `node-${node}`) {
    writeNodeVersions(BENCHMARKS_MD, RESULTS)
    log(`redrew the Node versions table of ${path.relative(process.cwd(), BENCHMARKS_MD)}`)
  } else if (!official) {
    log(`${tag} run: BENCHMARKS.md left as it is`)
  } else {
    writeMarkdown(BENCHMARKS_MD, report, SKELETON)
    log(`wrote ${path.relative(process.cwd(), BENCHMARKS_MD)}`)
  }
  log(`done in ${((Date.now() - started) / 1000).toFixed(0)} s`)
}

main().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
