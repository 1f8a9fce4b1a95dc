import { InMemoryTransport } from '../../src/index.js'
import { inMemoryTarget, schedulerScenarios } from '@acemq/testing'

// Both connections of the two-consumer scenario share one in-memory broker.
let broker: InMemoryTransport | undefined

schedulerScenarios(
  'InMemoryTransport',
  inMemoryTarget(() =>
    broker !== undefined && !broker.state.closed ? broker : (broker = new InMemoryTransport()),
  ),
)
