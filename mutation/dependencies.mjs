// What a target's tests depend on: every source file of the repository that its test files
// import, directly or through other files, found by reading the import and export statements
// (relative paths, and `@acemq/*` names through the packages' `@acemq/source` export condition,
// the way mutation/vitest.config.ts resolves them). `--changed` (mutation/run.mjs) compares these
// too, so a change to a helper, a scenario or a source file a test reaches re-runs the target
// even when the file is not one it mutates.
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import path from 'node:path'

/** `import … from '…'`, `export … from '…'`, `import '…'` and `import('…')`. */
const SPECIFIER =
  /(?:^|[\s;])(?:import|export)\s[^'"`;]*?from\s*['"]([^'"]+)['"]|(?:^|[\s;])import\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/gm

/** The module specifiers a source text names. */
export function specifiersIn(text) {
  const found = []
  for (const match of text.matchAll(SPECIFIER)) found.push(match[1] ?? match[2] ?? match[3])
  return found
}

/** `@acemq/<name>` and its subpaths → the source file each names, from the packages' manifests. */
export function packageEntries(root) {
  const entries = new Map()
  for (const dir of readdirSync(path.join(root, 'packages'))) {
    const manifest = path.join(root, 'packages', dir, 'package.json')
    if (!existsSync(manifest)) continue
    const parsed = JSON.parse(readFileSync(manifest, 'utf8'))
    const exportsMap = parsed.exports ?? { '.': { '@acemq/source': './src/index.ts' } }
    for (const [subpath, target] of Object.entries(exportsMap)) {
      const source =
        typeof target === 'object' && target !== null ? target['@acemq/source'] : undefined
      if (typeof source !== 'string') continue
      const name = subpath === '.' ? parsed.name : `${parsed.name}/${subpath.slice(2)}`
      entries.set(name, path.join('packages', dir, source))
    }
  }
  return entries
}

const isFile = (file) => existsSync(file) && statSync(file).isFile()

/** The repository file a relative specifier names (TypeScript's `.js` → `.ts` included), if any. */
function resolveRelative(root, fromFile, specifier) {
  const base = path.join(path.dirname(fromFile), specifier)
  const stem = base.replace(/\.(c|m)?js$/, '')
  const candidates = [
    base,
    `${stem}.ts`,
    `${stem}.tsx`,
    `${stem}.mts`,
    `${stem}.cts`,
    path.join(base, 'index.ts'),
  ]
  return candidates.find((candidate) => isFile(path.join(root, candidate)))
}

/**
 * Every repository file the given files reach through their imports, the files themselves
 * included, as paths relative to `root`, sorted. Packages outside the workspace (node_modules)
 * are not followed.
 */
export function reachedFrom(root, files) {
  const entries = packageEntries(root)
  const seen = new Set()
  const queue = [...files]
  while (queue.length > 0) {
    const file = queue.pop()
    if (seen.has(file)) continue
    seen.add(file)
    if (!/\.(c|m)?[jt]sx?$/.test(file)) continue
    for (const specifier of specifiersIn(readFileSync(path.join(root, file), 'utf8'))) {
      const next = specifier.startsWith('.')
        ? resolveRelative(root, file, specifier)
        : entries.get(specifier)
      if (next !== undefined && !seen.has(next)) queue.push(path.normalize(next))
    }
  }
  return [...seen].sort()
}

/** The tracked files matching git glob pathspecs, relative to `root`. */
export function filesMatching(root, globs) {
  if (globs.length === 0) return []
  const out = execFileSync('git', ['ls-files', '-z', '--', ...globs.map((g) => `:(glob)${g}`)], {
    cwd: root,
    encoding: 'utf8',
  })
  return out.split('\0').filter((file) => file !== '')
}
