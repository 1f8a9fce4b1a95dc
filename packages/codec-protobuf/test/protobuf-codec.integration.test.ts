import { requireRabbit } from '@acemq/testing'
import { codecSamples } from '../../../test-support/codec-samples.js'
import { codecOnRabbit } from '../../../test-support/codec-on-rabbit.js'
import { protobufCodec } from '../src/index.js'

codecOnRabbit(
  'protobufCodec',
  protobufCodec({ schema: codecSamples.proto_schema, messageType: 'acemq.test.OrderPlaced' }),
  { order_id: 'o-1', total_cents: 4250, tenant: 'acme' },
  await requireRabbit(),
)
