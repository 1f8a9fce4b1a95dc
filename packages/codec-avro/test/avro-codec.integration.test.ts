import { requireRabbit } from '@acemq/testing'
import { codecSamples } from '../../../test-support/codec-samples.js'
import { codecOnRabbit } from '../../../test-support/codec-on-rabbit.js'
import { avroCodec, registeredAvroCodec, type AvroSchema } from '../src/index.js'

const hasRabbit = await requireRabbit()
const schema = codecSamples.avro_schema as AvroSchema
const order = { orderId: 'o-1', totalCents: 4250, tenant: 'acme' }

codecOnRabbit('avroCodec', avroCodec({ schema }), order, hasRabbit)
codecOnRabbit(
  'registeredAvroCodec',
  registeredAvroCodec({ schemas: { 7: schema }, writeSchemaId: 7 }),
  order,
  hasRabbit,
)
