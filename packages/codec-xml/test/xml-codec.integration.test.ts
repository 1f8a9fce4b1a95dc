import { requireRabbit } from '@acemq/testing'
import { codecOnRabbit } from '../../../test-support/codec-on-rabbit.js'
import { xmlCodec } from '../src/index.js'

codecOnRabbit(
  'xmlCodec',
  xmlCodec({ rootName: 'OrderPlaced', arrays: ['items'] }),
  { orderId: 'o-1', customer: 'Ana Söderström', totalCents: '4250', items: ['widget'] },
  await requireRabbit(),
)
