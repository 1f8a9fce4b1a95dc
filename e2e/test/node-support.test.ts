import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

// The Node versions of docs/design.md §1: every package supports Node 22.12 or later, its
// `engines` says so, and its README names no other floor. A package added later must not carry
// an older one (the codecs, the console and the NestJS module once said 20.19).
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const SUPPORTED = '>=22.12.0'

interface Manifest {
  readonly name: string
  readonly private?: boolean
  readonly engines?: { readonly node?: string }
}

const packages = readdirSync(path.join(root, 'packages'), { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => {
    const folder = path.join(root, 'packages', entry.name)
    const manifest = JSON.parse(readFileSync(path.join(folder, 'package.json'), 'utf8')) as Manifest
    const readme = readFileSync(path.join(folder, 'README.md'), 'utf8')
    return { folder: entry.name, manifest, readme }
  })
  .filter(({ manifest }) => manifest.private !== true)

describe('the Node versions every package supports', () => {
  it('finds the published packages', () => {
    expect(packages.map(({ manifest }) => manifest.name)).toContain('@acemq/core')
    expect(packages.length).toBeGreaterThanOrEqual(16)
  })

  it.each(packages.map(({ folder, manifest }) => [folder, manifest.engines?.node]))(
    "%s's engines say %s",
    (_folder, node) => {
      expect(node).toBe(SUPPORTED)
    },
  )

  it.each(packages.map(({ folder, readme }) => [folder, readme]))(
    "%s's README names Node 22.12 as its floor, if it names one",
    (_folder, readme) => {
      const floors = [...readme.matchAll(/Node (\d+\.\d+)(?:\+| or later)/g)].map((m) => m[1])
      for (const floor of floors) expect(floor).toBe('22.12')
    },
  )

  it('the root manifest lets the repository itself run on the tested Node 20 as well', () => {
    const manifest = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as Manifest
    expect(manifest.engines?.node).toBe(`^20.19.0 || ${SUPPORTED}`)
  })
})
