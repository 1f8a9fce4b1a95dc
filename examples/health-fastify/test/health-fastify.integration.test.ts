import { requireRabbit } from '@acemq/testing'
import { healthExampleSuite } from '../../test-support/health-example-suite.js'

healthExampleSuite('health-fastify', await requireRabbit())
