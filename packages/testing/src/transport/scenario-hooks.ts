import { afterEach, beforeEach } from 'vitest'
import type { AceMqOptions } from '@acemq/core'
import type { Transport } from '@acemq/core/spi'
import {
  closeScenario,
  openScenario,
  type ScenarioConnection,
  type ScenarioTarget,
} from './engine-scenarios.js'

/**
 * Opens a scenario's connection on `target` before each test of the enclosing `describe`
 * (handing it to `opened`) and closes it after each, deleting the queues listed in `queues`.
 */
export function eachScenario<T extends Transport = Transport>(
  target: ScenarioTarget,
  queues: string[],
  opened: (connection: ScenarioConnection<T>) => void,
  wrap?: (inner: Transport) => T,
  options?: AceMqOptions,
): void {
  let connection: ScenarioConnection<T>

  beforeEach(async () => {
    connection = await openScenario(target, wrap, options)
    opened(connection)
  })

  afterEach(async () => {
    await closeScenario(connection, queues)
  })
}
