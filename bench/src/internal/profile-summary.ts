import fs from 'node:fs'

interface CallFrame {
  readonly functionName: string
  readonly url: string
  readonly lineNumber: number
}

interface ProfileNode {
  readonly id: number
  readonly callFrame: CallFrame
}

interface CpuProfile {
  readonly nodes: readonly ProfileNode[]
  readonly samples: readonly number[]
  readonly timeDeltas: readonly number[]
}

/** One function's self time. */
export interface HotFunction {
  readonly name: string
  readonly where: string
  readonly area: string
  readonly selfMs: number
  /** Share of the busy (non-idle) time. */
  readonly percent: number
}

/** What a CPU profile says, in a few lines. */
export interface ProfileSummary {
  readonly file: string
  readonly busyMs: number
  readonly idleMs: number
  /** Self time by area (`@acemq/core`, `amqplib`, `node`, `gc`, ...), largest first. */
  readonly areas: readonly {
    readonly area: string
    readonly selfMs: number
    readonly percent: number
  }[]
  readonly top: readonly HotFunction[]
}

/** Which code a profile frame belongs to. */
function areaOf(frame: CallFrame): string {
  const { url, functionName } = frame
  if (url === '') {
    if (functionName === '(idle)') return 'idle'
    if (functionName === '(garbage collector)') return 'gc'
    if (functionName === '(program)') return 'V8 / native'
    return functionName === '(root)' ? 'idle' : 'V8 / native'
  }
  const packages = /\/packages\/([^/]+)\//.exec(url)
  if (packages !== null) return `@acemq/${packages[1]}`
  const modules = /node_modules\/(?:\.pnpm\/)?(@[^/@]+\/[^/@]+|[^/@]+)/.exec(url)
  if (modules !== null) {
    // `.pnpm/<name>@<version>/node_modules/<name>/...`: take the last package directory.
    const last = /.*node_modules\/(@[^/]+\/[^/]+|[^/]+)\//.exec(url)
    return last?.[1] ?? modules[1] ?? url
  }
  // The promise hooks an enabled AsyncLocalStorage installs (Node 20/22): every promise pays them.
  if (url === 'node:internal/async_hooks' || url === 'node:async_hooks') return 'async_hooks'
  if (url.startsWith('node:')) return 'node'
  if (url.includes('/bench/src/')) return 'bench harness'
  return 'other'
}

function shortWhere(frame: CallFrame): string {
  const { url } = frame
  if (url === '') return ''
  const path = url
    .replace(/^file:\/\//, '')
    .replace(/^.*\/node_modules\/\.pnpm\/[^/]+\/node_modules\//, '')
    .replace(/^.*\/(packages|bench)\//, '$1/')
  // Line numbers are those of the code V8 ran (tsx's output), close to the source's.
  return `${path}:${frame.lineNumber + 1}`
}

/** Reads a `.cpuprofile` and sums self time per function and per area. */
export function summarizeProfile(file: string, topN = 20): ProfileSummary {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as CpuProfile
  const byId = new Map<number, ProfileNode>()
  for (const node of profile.nodes) byId.set(node.id, node)
  const selfUs = new Map<number, number>()
  const { samples, timeDeltas } = profile
  for (let i = 0; i < samples.length; i++) {
    // A sample's time is the gap to the next one.
    const delta = timeDeltas[i + 1] ?? 0
    const id = samples[i] as number
    selfUs.set(id, (selfUs.get(id) ?? 0) + delta)
  }
  const functions = new Map<string, { frame: CallFrame; us: number }>()
  const areas = new Map<string, number>()
  let idleUs = 0
  let busyUs = 0
  for (const [id, us] of selfUs) {
    const node = byId.get(id)
    if (node === undefined) continue
    const area = areaOf(node.callFrame)
    if (area === 'idle') {
      idleUs += us
      continue
    }
    busyUs += us
    areas.set(area, (areas.get(area) ?? 0) + us)
    const key = `${node.callFrame.functionName}|${node.callFrame.url}|${node.callFrame.lineNumber}`
    const entry = functions.get(key)
    if (entry === undefined) functions.set(key, { frame: node.callFrame, us })
    else entry.us += us
  }
  const pct = (us: number): number => (busyUs === 0 ? 0 : (100 * us) / busyUs)
  return {
    file,
    busyMs: busyUs / 1000,
    idleMs: idleUs / 1000,
    areas: [...areas.entries()]
      .sort((a, b) => b[1] - a[1])
      .map(([area, us]) => ({ area, selfMs: us / 1000, percent: pct(us) })),
    top: [...functions.values()]
      .sort((a, b) => b.us - a.us)
      .slice(0, topN)
      .map(({ frame, us }) => ({
        name: frame.functionName === '' ? '(anonymous)' : frame.functionName,
        where: shortWhere(frame),
        area: areaOf(frame),
        selfMs: us / 1000,
        percent: pct(us),
      })),
  }
}
