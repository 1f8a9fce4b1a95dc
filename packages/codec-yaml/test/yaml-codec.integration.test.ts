import { requireRabbit } from '@acemq/testing'
import { codecOnRabbit } from '../../../test-support/codec-on-rabbit.js'
import { yamlCodec } from '../src/index.js'

codecOnRabbit(
  'yamlCodec',
  yamlCodec,
  { orderId: 'o-1', customer: 'Ana Söderström', totalCents: 4250, items: ['widget', 'gasket'] },
  await requireRabbit(),
)
