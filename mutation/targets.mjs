// What the mutation run mutates, and which fast tests it runs against each part. One target per
// folder of core's decision code and one per store; `pnpm test:mutation` runs them one after the
// other (node mutation/run.mjs --help). Tests are chosen for speed and determinism: the
// in-memory transport and stores, fake or virtual clocks. The broker suites never run here.
import { readFileSync } from 'node:fs'

/**
 * Line ranges (`file:from-to`) of the named members of a source file, found by their first line
 * and their closing brace at the same indentation, so that a store's claim / confirm / release /
 * purge are mutated and nothing else in the file. Throws when a member is missing, so that a
 * rename cannot silently shrink what is mutated.
 */
export function members(file, names) {
  const lines = readFileSync(file, 'utf8').split('\n')
  return names.map((name) => {
    const start = lines.findIndex((line) => line.startsWith(name))
    if (start < 0)
      throw new Error(`mutation target: no line in ${file} starts with ${JSON.stringify(name)}`)
    const indent = name.match(/^ */)[0]
    const end = lines.findIndex((line, i) => i > start && line === `${indent}}`)
    if (end < 0) throw new Error(`mutation target: no end for ${JSON.stringify(name)} in ${file}`)
    return `${file}:${start + 1}-${end + 1}`
  })
}

const SQLITE_STORE = 'packages/store-sqlite/src/sqlite-idempotency-store.ts'
const KYSELY_STORE = 'packages/store-kysely/src/kysely-idempotency-store.ts'

/**
 * What a target's results depend on, as git pathspecs: the files it mutates, its tests, what
 * tests share (test-support/, the @acemq/testing kit) and this folder, less the results themselves (a run rewrites
 * them). A change elsewhere that alters what a test sees is caught by the next full run
 * (`pnpm test:mutation --force`).
 */
export function inputsOf(target) {
  const mutated = (typeof target.mutate === 'function' ? target.mutate() : target.mutate).map(
    (spec) => spec.replace(/:\d+-\d+$/, ''),
  )
  const globs = [
    ...new Set(mutated),
    ...target.testFiles,
    'test-support',
    'packages/testing',
    'mutation',
  ]
  return [...globs.map((glob) => `:(glob)${glob}`), ':!mutation/incremental']
}

/**
 * Every target, in the order a whole run takes them. `floor` is the score below which the run
 * fails (Stryker's break threshold), 85 % unless a target is still short of it: then the score it
 * has reached, so that it can only go up (docs/mutation.md lists what survives and why).
 */
export const TARGETS = [
  {
    name: 'core-retry',
    floor: 85,
    mutate: ['packages/core/src/retry/**/*.ts'],
    testFiles: [
      'packages/core/test/retry/retry-policy.test.ts',
      'packages/core/test/retry/queue-names.test.ts',
      'packages/core/test/retry/broker-wait-limit.test.ts',
      'packages/core/test/retry/refusals.test.ts',
      'packages/core/test/retry/contract-fixtures.test.ts',
    ],
  },
  {
    name: 'core-topology',
    floor: 85,
    mutate: ['packages/core/src/topology/**/*.ts'],
    testFiles: [
      'packages/core/test/topology/*.test.ts',
      'packages/core/test/retry/contract-fixtures.test.ts',
    ],
  },
  {
    name: 'core-envelope',
    floor: 85,
    mutate: ['packages/core/src/envelope/**/*.ts'],
    testFiles: ['packages/core/test/envelope/*.test.ts'],
  },
  {
    name: 'core-health',
    floor: 85,
    mutate: ['packages/core/src/health/**/*.ts'],
    testFiles: ['packages/core/test/health/*.test.ts'],
  },
  {
    name: 'core-idempotency',
    floor: 85,
    mutate: ['packages/core/src/idempotency/**/*.ts'],
    testFiles: ['packages/core/test/idempotency/*.test.ts'],
  },
  {
    name: 'core-consumer',
    floor: 85,
    mutate: ['packages/core/src/consumer/**/*.ts'],
    testFiles: ['packages/core/test/consumer/*.test.ts', 'packages/core/test/engine/*.test.ts'],
  },
  {
    name: 'store-sqlite',
    floor: 85,
    mutate: () =>
      members(SQLITE_STORE, [
        '  async tryClaim(',
        '  async claim(',
        '  async confirm(',
        '  async release(',
        '  async isConfirmed(',
        '  async purgeExpired(',
        '  #purge(',
        '  #maybePurge(',
        '  #prepare(',
      ]),
    testFiles: [
      'packages/store-sqlite/test/sqlite-idempotency-store.test.ts',
      'packages/store-sqlite/test/sqlite-idempotency-store-edges.test.ts',
    ],
  },
  {
    name: 'store-kysely',
    floor: 85,
    mutate: () =>
      members(KYSELY_STORE, [
        '  async tryClaim(',
        '  async claim(',
        '  async confirm(',
        '  async release(',
        '  async isConfirmed(',
        '  async purgeExpired(',
        '  async #insertMysql(',
        '  async #read(',
        '  async #purge(',
        '  #maybePurge(',
        'function statements(',
        'function affected(',
        'function isDuplicateKey(',
      ]),
    testFiles: [
      'packages/store-kysely/test/kysely-idempotency-store.test.ts',
      'packages/store-kysely/test/kysely-idempotency-store-edges.test.ts',
      'packages/store-kysely/test/kysely-idempotency-store.sqlite.test.ts',
      'packages/store-kysely/test/kysely-idempotency-store.integration.test.ts',
      'packages/store-kysely/test/kysely-idempotency-store.mysql.integration.test.ts',
    ],
  },
]
