import { existsSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

// The AceMQ family's cross-language fixtures, kept in the repository's `fixtures/` byte for byte
// as the Java library generated them (fixtures/README.md says where each comes from). Never
// edit or reformat them: the other libraries test against the same bytes.

function repoRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url))
  for (;;) {
    if (existsSync(path.join(dir, 'pnpm-workspace.yaml'))) return dir
    const parent = path.dirname(dir)
    if (parent === dir) throw new Error('could not find the repository root (pnpm-workspace.yaml)')
    dir = parent
  }
}

/** Where the fixture files are: `fixtures/` at the repository's root. */
export const FIXTURES_DIR = path.join(repoRoot(), 'fixtures')

function load<T>(name: string): T {
  const file = path.join(FIXTURES_DIR, name)
  if (!existsSync(file)) throw new Error(`the fixture ${file} is missing`)
  return JSON.parse(readFileSync(file, 'utf8')) as T
}

export interface EnvelopeFixtureCase {
  readonly case: string
  readonly routingKey: string
  readonly messageId: string
  readonly body: string
  readonly contentType: string
  readonly headers: Record<string, string | number>
}

export interface EnvelopeFixtures {
  readonly generatedBy: string
  readonly contract: string
  readonly cases: readonly EnvelopeFixtureCase[]
}

export interface RetryDecision {
  readonly attempt: number
  readonly messageAgeMillis: number
  readonly retries: boolean
}

export interface RetryScheduleCase {
  readonly name: string
  readonly how: string
  readonly maxAttempts: number
  readonly maxMessageAgeMillis: number
  readonly jitterFactor: number
  readonly brokerWaitThresholdMillis: number
  readonly scheduleMillis: readonly number[]
  readonly brokerRungDelaysMillis: readonly number[]
  readonly decisions: readonly RetryDecision[]
}

export interface ContractFixtures {
  readonly generatedBy: string
  readonly contract: string
  readonly defaultBrokerWaitThresholdMillis: number
  readonly deadLetterExchange: string
  readonly retryExchange: string
  readonly retrySchedules: readonly RetryScheduleCase[]
  readonly jitter: {
    readonly policy: string
    readonly factor: number
    readonly appliesInBothDirections: boolean
    readonly minMultiplier: number
    readonly maxMultiplier: number
    readonly appliesToConsumerWaits: boolean
    readonly appliesToBrokerWaits: boolean
    readonly flooredAtMillis: number
  }
  readonly brokerWaitThreshold: {
    readonly defaultMillis: number
    readonly cases: readonly {
      readonly thresholdMillis: number
      readonly delayMillis: number
      readonly waitsInBroker: boolean
    }[]
  }
  readonly naming: {
    readonly queue: string
    readonly deadLetterQueue: string
    readonly parkedQueue: string
    readonly retryQueues: readonly { readonly delayMillis: number; readonly queue: string }[]
    readonly subSecondDisagreement: string
  }
  readonly rungArguments: readonly {
    readonly queue: string
    readonly delayMillis: number
    readonly arguments: Record<string, string | number>
  }[]
  readonly topology: {
    readonly sourceQueue: string
    readonly policy: string
    readonly policyScheduleMillis: readonly number[]
    readonly policyRungDelaysMillis: readonly number[]
    readonly queues: readonly {
      readonly name: string
      readonly type: string
      readonly durable: boolean
      readonly arguments: Record<string, string | number>
      readonly declaredBy: string
    }[]
    readonly exchanges: readonly {
      readonly name: string
      readonly type: string
      readonly durable: boolean
      readonly declaredBy: string
    }[]
    readonly bindings: readonly {
      readonly queue: string
      readonly exchange: string
      readonly routingKey: string
      readonly declaredBy: string
    }[]
  }
  /** The queue type each kind of declared queue gets, and their durability. */
  readonly queueTypeDefaults: {
    readonly sourceQueue: string
    readonly sourceQueueWithDeadLetter: string
    readonly explicitClassicQueue: string
    readonly explicitClassicQueueWithDeadLetter: string
    readonly deadLetterQueue: string
    readonly parkedQueue: string
    readonly retryRung: string
    readonly durability: {
      readonly everyDeclaredQueueIsDurable: boolean
      readonly exclusiveAutoDeleteOrTransient: string
    }
  }
}

/** `envelope-fixtures.json`: the `x-acemq-*` headers a publish puts on the wire. */
export const envelopeFixtures = load<EnvelopeFixtures>('envelope-fixtures.json')

/** `contract-fixtures.json`: retry schedules, thresholds, jitter, names and topology. */
export const contractFixtures = load<ContractFixtures>('contract-fixtures.json')
