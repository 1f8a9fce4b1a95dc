import { requireRabbit } from '../../../test-support/services.js'
import { healthExampleSuite } from '../../test-support/health-example-suite.js'

healthExampleSuite('health-fastify', await requireRabbit())
