import { requireRabbit } from '@acemq/testing'
import { healthEndpointUnderMemoryAlarm } from '../../../test-support/health-endpoint-on-rabbit.js'
import { acemqHealth } from '../src/index.js'
import { serve } from './serve.js'

healthEndpointUnderMemoryAlarm(
  'acemqHealth (Express)',
  { serve: (source, options) => serve((app) => app.use(acemqHealth(source, options))) },
  await requireRabbit(),
)
