import { requireRabbit } from '@acemq/testing'
import { healthEndpointUnderMemoryAlarm } from '../../../test-support/health-endpoint-on-rabbit.js'
import { acemqHealth } from '../src/index.js'
import { serve } from './serve.js'

healthEndpointUnderMemoryAlarm(
  'acemqHealth (Fastify)',
  {
    serve: (source, options) =>
      serve(async (app) => {
        await app.register(acemqHealth, { mq: source, ...options })
      }),
  },
  await requireRabbit(),
)
