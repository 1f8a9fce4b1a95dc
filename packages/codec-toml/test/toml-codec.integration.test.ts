import { requireRabbit } from '@acemq/testing'
import { codecOnRabbit } from '../../../test-support/codec-on-rabbit.js'
import { tomlCodec } from '../src/index.js'

codecOnRabbit(
  'tomlCodec',
  tomlCodec,
  { orderId: 'o-1', customer: 'Ana Söderström', totalCents: 4250, items: ['widget', 'gasket'] },
  await requireRabbit(),
)
