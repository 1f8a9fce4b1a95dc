import { healthEndpointUnderMemoryAlarm } from '../../../test-support/health-endpoint-contract.js'
import { requireRabbit } from '../../../test-support/services.js'
import { acemqHealth } from '../src/index.js'
import { serve } from './serve.js'

healthEndpointUnderMemoryAlarm(
  'acemqHealth (Express)',
  { serve: (source, options) => serve((app) => app.use(acemqHealth(source, options))) },
  await requireRabbit(),
)
