import { afterAll, beforeAll, describe } from 'vitest'
import { amqpScenarioTarget } from '../../../test-support/amqp-target.js'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import { pipelineScenarios, requireRabbit } from '@acemq/testing'

const hasRabbit = await requireRabbit()

describe.runIf(hasRabbit)('pipelines on AmqpTransport', () => {
  let vhost: BrokerVhost
  beforeAll(async () => {
    vhost = await BrokerVhost.create('acemq-pipeline')
  })
  afterAll(async () => {
    await vhost?.delete()
  })

  // The target is created per scenario, after the vhost exists.
  pipelineScenarios('AmqpTransport (RabbitMQ)', {
    createTransport: () => amqpScenarioTarget(vhost.url, 'acemq-pipeline').createTransport(),
    probe: (transport) => amqpScenarioTarget(vhost.url, 'acemq-pipeline').probe(transport),
  })
})
