// What the mutation run mutates, and which fast tests it runs against each part. One target per
// folder of core's decision code, one per store, and one each for the AMQP transport's batched
// acks and the Kysely store's batched Postgres path; `pnpm test:mutation` runs them one after the
// other (node mutation/run.mjs --help). Tests are chosen for speed and determinism: the
// in-memory transport and stores, fake or virtual clocks. The broker suites never run here.
import { readFileSync } from 'node:fs'
import { filesMatching, reachedFrom } from './dependencies.mjs'

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
const KYSELY_STATEMENTS = 'packages/store-kysely/src/idempotency-statements.ts'
const AMQP_SUBSCRIPTION = 'packages/transport-amqp/src/internal/subscription.ts'

/**
 * What a target's results depend on, as git pathspecs: the files it mutates, its tests, every
 * repository file those tests import (directly or through other files: helpers, the
 * `@acemq/testing` kit, test-support/, the sources of every package they reach —
 * mutation/dependencies.mjs), what it names in `inputs` (files read at run time), and this
 * folder, less the results themselves (a run rewrites them). A change that alters what a test
 * sees without going through an import (a fixture it reads, a service's version) is caught by
 * the next full run (`pnpm test:mutation --force`).
 */
export function inputsOf(target, root = process.cwd()) {
  const mutated = (typeof target.mutate === 'function' ? target.mutate() : target.mutate).map(
    (spec) => spec.replace(/:\d+-\d+$/, ''),
  )
  const reached = reachedFrom(root, filesMatching(root, target.testFiles))
  const globs = [
    ...new Set([...mutated, ...target.testFiles, ...(target.inputs ?? []), ...reached]),
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
    // The family's fixture files the contract tests read.
    inputs: ['fixtures/*.json'],
  },
  {
    name: 'core-topology',
    floor: 85,
    mutate: ['packages/core/src/topology/**/*.ts'],
    testFiles: [
      'packages/core/test/topology/*.test.ts',
      'packages/core/test/retry/contract-fixtures.test.ts',
    ],
    inputs: ['fixtures/*.json'],
  },
  {
    name: 'core-envelope',
    floor: 85,
    mutate: ['packages/core/src/envelope/**/*.ts', 'packages/core/src/headers/**/*.ts'],
    testFiles: ['packages/core/test/envelope/*.test.ts'],
    inputs: ['fixtures/*.json'],
  },
  {
    name: 'core-health',
    floor: 85,
    mutate: ['packages/core/src/health/**/*.ts', 'packages/core/src/redaction/**/*.ts'],
    testFiles: ['packages/core/test/health/*.test.ts', 'packages/core/test/redaction/*.test.ts'],
  },
  {
    name: 'core-idempotency',
    floor: 85,
    mutate: ['packages/core/src/idempotency/**/*.ts', 'packages/core/src/sql/**/*.ts'],
    testFiles: ['packages/core/test/idempotency/*.test.ts', 'packages/core/test/sql/*.test.ts'],
  },
  {
    name: 'core-consumer',
    // Past the 85 % target (docs/mutation.md lists the survivors and why they live).
    floor: 85,
    mutate: ['packages/core/src/consumer/**/*.ts'],
    testFiles: [
      'packages/core/test/consumer/*.test.ts',
      'packages/core/test/engine/*.test.ts',
      'packages/core/test/simulation/simulation.test.ts',
      // The engine's ordered (in-place failures, holds) and pipeline (forward, hops) paths.
      'packages/core/test/ordered/in-memory-ordered.test.ts',
      'packages/core/test/ordered/ordered-queue.test.ts',
      'packages/core/test/pipeline/in-memory-pipeline.test.ts',
    ],
    // The simulation's schedules, world and fault doubles are what its test file runs.
    // So are the consumer tests' helpers (the fake clock, the hand-driven transport).
    inputs: ['packages/core/test/simulation/*.ts', 'packages/core/test/consumer/*.ts'],
    // The fault-schedule property test: a fixed seed (the same schedules every run, so the
    // results stay comparable between incremental runs), 100 schedules (~4 s; CI's ordinary run
    // takes 2,000 with a random seed), reported unshrunk (a shrink reruns whole schedules).
    env: { ACEMQ_SIM_RUNS: '100', ACEMQ_SIM_SEED: '20261203', ACEMQ_SIM_NO_SHRINK: '1' },
    // Tests that wait real time (a 5 s abandon grace, a 3 s handler, the confirm's 2.6 s of
    // retries, the pipeline's 5 s put-back) or spend seconds of CPU on 200,000 virtual timers:
    // 45 of the 55 s these files take. Every mutant they cover would pay for them. They still run
    // in the ordinary suite, and what they pin of the consumer is pinned here on a fake clock
    // (packages/core/test/consumer/consumer-timing.test.ts). A name that no longer matches only
    // makes the run slower.
    leaveOut: [
      'stops counting a handler in inFlight once a close has given up on it',
      'keeps other deliveries flowing while one waits out a consumer-side retry delay',
      'shares one close deadline between consumers instead of waiting for each in turn',
      'abandons a handler that ignores its signal after 5 s, closes, and never sends its late ack',
      'drains to false at a 300 ms timeout while a 3 s handler runs',
      'rejects a drain when its signal aborts, and at once when it already has',
      'closes once its running 1 s handler is done, without running the 9 queued, and hands them back at attempt 1',
      'handles exactly once when the store’s release fails and the handler fails once',
      'is tried four times over ~2.6 s, then the message is acked all the same and the failure reported once',
      'is waited for by a close, as part of the drain: the work is done, the confirm keeps it from being done again',
      'spends a broker wait in {q}.retry.1s and gets the message back',
      'finding 10: a release that fails once is tried again, not left to stall its message for the whole lease',
      'puts back a step whose claim is live elsewhere, after the default delay, and runs it once the claim is released',
      'finding 11: messages in progress until a lease held by a given-up handler lapses are waited for, not called a livelock',
    ],
    // A mutant that hangs a test is stopped 5 s past the test's usual time (and counts as killed).
    timeoutMS: 5_000,
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
      ]).concat(
        members(KYSELY_STATEMENTS, [
          'export function statements(',
          'export function affected(',
          'export function isDuplicateKey(',
        ]),
      ),
    testFiles: [
      'packages/store-kysely/test/kysely-idempotency-store.test.ts',
      'packages/store-kysely/test/kysely-idempotency-store-edges.test.ts',
      'packages/store-kysely/test/kysely-idempotency-store.sqlite.test.ts',
      'packages/store-kysely/test/kysely-idempotency-store.integration.test.ts',
      'packages/store-kysely/test/kysely-idempotency-store.mysql.integration.test.ts',
    ],
  },
  {
    // A consumer channel's batched acknowledgements, and a delivery's ack and nack that feed
    // them, on a fake channel: the broker suite (batched-acks.integration.test.ts) never runs here.
    name: 'transport-amqp-acks',
    floor: 85,
    mutate: () =>
      ['packages/transport-amqp/src/internal/channel-acks.ts'].concat(
        members(AMQP_SUBSCRIPTION, [
          '  get settleable(',
          '  ack(): boolean {',
          '  nack(requeue: boolean): boolean {',
          '  #settle(',
        ]),
      ),
    testFiles: [
      'packages/transport-amqp/test/internal/channel-acks.test.ts',
      'packages/transport-amqp/test/internal/amqp-delivery.test.ts',
    ],
    inputs: ['packages/transport-amqp/test/support/recording-channel.ts'],
  },
  {
    // The Kysely store's batched Postgres path: concurrent first claims in one insert, concurrent
    // confirms in one upsert, against the real PostgreSQL (as the store-kysely target).
    name: 'store-kysely-batch',
    floor: 85,
    mutate: () =>
      ['packages/store-kysely/src/internal/batch.ts'].concat(
        members(KYSELY_STORE, [
          '  async #insertMany(',
          '  async #confirmMany(',
          '  #runBatch(',
          'function batchable<T>(',
        ]),
      ),
    testFiles: [
      'packages/store-kysely/test/batch.test.ts',
      'packages/store-kysely/test/kysely-idempotency-batch.integration.test.ts',
      // The scripted drivers: a batched confirm whose row count is not reported (Postgres), no
      // batch at all (MySQL).
      'packages/store-kysely/test/kysely-idempotency-store-edges.test.ts',
      'packages/store-kysely/test/kysely-idempotency-store.test.ts',
    ],
    // A mutant that never ends a batch hangs its test: stopped 5 s past the test's usual time.
    timeoutMS: 5_000,
  },
  {
    name: 'core-ordered',
    floor: 85,
    mutate: ['packages/core/src/ordered/**/*.ts'],
    // The partition hash, the builder and queue, the scenarios on the in-memory transport.
    testFiles: ['packages/core/test/ordered/*.test.ts'],
    // The family's partition figures the hash test reads, and the transport that refuses one
    // queue (a consume, or a build, that cannot start everything).
    inputs: [
      'packages/core/test/ordered/partition-fixtures.json',
      'packages/core/test/refusing-transport.ts',
    ],
    timeoutMS: 5_000,
  },
  {
    name: 'core-pipeline',
    floor: 85,
    mutate: ['packages/core/src/pipeline/**/*.ts'],
    // The builder, the route headers, the unserved steps, the hops, the scenarios on the
    // in-memory transport.
    testFiles: ['packages/core/test/pipeline/*.test.ts'],
    inputs: ['packages/core/test/refusing-transport.ts'],
    // Waits out the default 5 s put-back in real time (the ordinary suite still runs it).
    leaveOut: [
      'puts back a step whose claim is live elsewhere, after the default delay, and runs it once the claim is released',
    ],
    timeoutMS: 5_000,
  },
  {
    name: 'core-outbox-relay',
    floor: 85,
    mutate: [
      'packages/core/src/outbox/outbox-relay.ts',
      'packages/core/src/outbox/lease-keeper.ts',
      'packages/core/src/outbox/publish-outcome.ts',
      'packages/core/src/outbox/outbox-record.ts',
    ],
    testFiles: ['packages/core/test/outbox/*.test.ts'],
    // Tests that wait real time: a mark tried five times over 1.5 s, a lease renewed over a
    // second. What they pin is pinned on a fake clock in outbox-relay-clock.test.ts.
    leaveOut: [
      'marks the pipelined next batch even when one batch’s mark keeps failing: only that batch goes out again (issue 27 item 6)',
      'renews the lease while a batch is held: a second relay publishes none of it (issue 27 item 7)',
      'a mark that keeps failing costs its own batch only: the pipelined next batch is marked',
      'keeps the lease of a batch whose publishes are held: a second relay publishes none of it',
    ],
    timeoutMS: 5_000,
  },
  {
    name: 'core-replay',
    floor: 85,
    mutate: ['packages/core/src/replay/**/*.ts'],
    testFiles: ['packages/core/test/replay/*.test.ts'],
    timeoutMS: 5_000,
  },
]
