import { readdirSync, readFileSync, existsSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')

/** Every README a user reads: the root's, each package's and each example's. */
function readmes(): string[] {
  const found = [path.join(root, 'README.md')]
  for (const dir of ['packages', 'examples']) {
    for (const entry of readdirSync(path.join(root, dir))) {
      const readme = path.join(root, dir, entry, 'README.md')
      if (existsSync(readme)) found.push(readme)
    }
  }
  return found
}

interface Snippet {
  /** A file beside the README, so imports resolve from that package's dependencies. */
  readonly file: string
  readonly readme: string
  readonly line: number
  readonly source: string
}

function snippetsOf(readme: string): Snippet[] {
  const snippets: Snippet[] = []
  const lines = readFileSync(readme, 'utf8').split('\n')
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]?.trim() !== '```ts') continue
    const start = i + 1
    let end = start
    while (end < lines.length && lines[end]?.trim() !== '```') end++
    snippets.push({
      file: path.join(path.dirname(readme), `readme-snippet-${start + 1}.ts`),
      readme: path.relative(root, readme),
      line: start + 1,
      // A module of its own, so that its names shadow the ones declared for every snippet.
      source: `${lines.slice(start, end).join('\n')}\nexport {}\n`,
    })
    i = end
  }
  return snippets
}

/**
 * What a snippet may use without declaring it, as a reader would assume it: the connection, a
 * handler, the application's own types and functions. Everything else must be imported.
 */
const GIVEN = `
import type { AceMq, Handler } from '@acemq/core'
declare global {
  /** A connection, from connect() or AceMq.connect(). */
  const mq: AceMq
  /** The application's handler. */
  const handle: Handler<any>
  /** The application's logger. */
  const log: { info(...args: unknown[]): void; warn(...args: unknown[]): void; error(...args: unknown[]): void }
  /** The application's own work. */
  function ship(id: string, options?: { signal?: AbortSignal }): Promise<void>
  /** A Postgres connection string. */
  const connectionString: string
  /** The application's Kysely schema. */
  interface Database { orders: { id: string; total: number } }
  /** The application's Kysely instance. */
  const db: import('kysely').Kysely<Database>
  /** An order the application writes. */
  const order: { id: string; total: number }
  /** An ordered queue's entry, and the application's work on it. */
  interface Entry { id: string; account: string; amount: number }
  const entry: Entry
  function book(entry: Entry): Promise<void>
  /** A message type. */
  interface OrderPlaced { id: string; total: number }
}
`

describe('the TypeScript snippets in the READMEs', () => {
  const snippets = readmes().flatMap(snippetsOf)
  const given = path.join(root, 'e2e', 'readme-snippets.d.ts')

  it('are found', () => {
    expect(snippets.length).toBeGreaterThan(10)
  })

  it('compile, as a user would write them against the packages', () => {
    const options: ts.CompilerOptions = {
      target: ts.ScriptTarget.ES2022,
      lib: ['lib.es2023.d.ts', 'lib.esnext.disposable.d.ts'],
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      strict: true,
      exactOptionalPropertyTypes: true,
      noUncheckedIndexedAccess: true,
      skipLibCheck: true,
      noEmit: true,
      types: ['node'],
      // The packages' sources, as the other tests use them: no build needed.
      customConditions: ['@acemq/source'],
      // Nest's decorators (@acemq/nestjs's README) are the legacy ones, as in a Nest project.
      experimentalDecorators: true,
    }
    const virtual = new Map<string, string>([
      [given, GIVEN],
      ...snippets.map((s) => [s.file, s.source] as const),
    ])
    const host = ts.createCompilerHost(options)
    const read = host.readFile.bind(host)
    const exists = host.fileExists.bind(host)
    const getSourceFile = host.getSourceFile.bind(host)
    host.readFile = (file) => virtual.get(file) ?? read(file)
    host.fileExists = (file) => virtual.has(file) || exists(file)
    host.getSourceFile = (file, language, onError, create) => {
      const text = virtual.get(file)
      return text === undefined
        ? getSourceFile(file, language, onError, create)
        : ts.createSourceFile(file, text, language, true)
    }
    const program = ts.createProgram([given, ...snippets.map((s) => s.file)], options, host)
    const where = new Map(snippets.map((s) => [s.file, s]))
    const errors = ts
      .getPreEmitDiagnostics(program)
      .filter((d) => d.file !== undefined && where.has(d.file.fileName))
      .map((d) => {
        const snippet = where.get(d.file!.fileName)!
        const { line } = d.file!.getLineAndCharacterOfPosition(d.start ?? 0)
        return `${snippet.readme}:${snippet.line + line}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`
      })
    expect(errors).toStrictEqual([])
  }, 300_000)
})
