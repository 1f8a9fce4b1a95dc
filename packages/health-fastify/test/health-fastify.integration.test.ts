import { requireRabbit } from '@acemq/testing'
import { healthEndpointOnRabbit } from '../../../test-support/health-endpoint-on-rabbit.js'
import { acemqHealth } from '../src/index.js'
import { serve } from './serve.js'

healthEndpointOnRabbit(
  'acemqHealth (Fastify)',
  {
    serve: (source, options) =>
      serve(async (app) => {
        await app.register(acemqHealth, { mq: source, ...options })
      }),
  },
  await requireRabbit(),
)
