import { requireRabbit } from '@acemq/testing'
import { healthEndpointOnRabbit } from '../../../test-support/health-endpoint-on-rabbit.js'
import { acemqHealth } from '../src/index.js'
import { serve } from './serve.js'

healthEndpointOnRabbit(
  'acemqHealth (Express)',
  { serve: (source, options) => serve((app) => app.use(acemqHealth(source, options))) },
  await requireRabbit(),
)
