import { afterEach, beforeEach } from 'vitest'
import type { AceMqOptions } from '@acemq/core'
import type { Transport } from '@acemq/core/spi'
import {
  closeScenario,
  openScenario,
  type ScenarioConnection,
  type ScenarioTarget,
} from './engine-scenarios.js'

/** What {@link eachScenario} does besides opening and closing. */
export interface ScenarioHooks<T extends Transport> {
  /** Wraps the target's transport (see {@link openScenario}). */
  readonly wrap?: (inner: Transport) => T
  /** The options `AceMq.connect` is given. */
  readonly options?: AceMqOptions
  /** Runs after each test, before the connection is closed. */
  readonly closing?: () => Promise<void>
}

/**
 * Opens a scenario's connection on `target` before each test of the enclosing `describe`
 * (handing it to `opened`) and closes it after each, deleting the queues listed in `queues`.
 */
export function eachScenario<T extends Transport = Transport>(
  target: ScenarioTarget,
  queues: string[],
  opened: (connection: ScenarioConnection<T>) => void | Promise<void>,
  { wrap, options, closing }: ScenarioHooks<T> = {},
): void {
  let connection: ScenarioConnection<T>

  beforeEach(async () => {
    connection = await openScenario(target, wrap, options)
    await opened(connection)
  })

  afterEach(async () => {
    await closing?.()
    await closeScenario(connection, queues)
  })
}
