import { describe, expect, it } from 'vitest'
import { AceMq, CodecRegistry, ConsumerOptions, InMemoryTransport, Topology } from '@acemq/core'
import { eventually } from '@acemq/testing'
import { yamlCodec } from '../src/index.js'

// The engine's side of a codec error (docs/design.md §6: "could not decode"): a body the codec
// cannot read is never handed to the handler and never retried; it is parked with the reason.
describe('a YAML body the codec cannot read, on the in-memory transport', () => {
  it('ends in {queue}.parked with the decode error as its reason, and the handler never runs', async () => {
    const transport = new InMemoryTransport()
    const mq = await AceMq.connect(transport, { codecs: CodecRegistry.defaults().with(yamlCodec) })
    try {
      await mq.applyTopology(Topology.define().queueWithDeadLetter('orders.yaml'))
      const handled: unknown[] = []
      await mq.consume('orders.yaml', ConsumerOptions.defaults(), (message) => {
        handled.push(message.payload)
      })
      await transport.publish({
        exchange: '',
        routingKey: 'orders.yaml',
        body: Buffer.from('orderId: o-1\norderId: o-2\n'),
        headers: { 'x-acemq-id': 'bad-yaml-1' },
        properties: { contentType: 'application/yaml' },
        persistent: true,
        mandatory: true,
      })
      await mq
        .publisher('', 'orders.yaml', { contentType: 'application/yaml' })
        .send({ orderId: 'o-3' })
      await eventually(() => transport.messageCount('orders.yaml.parked') === 1, 5_000, 'parked')
      await eventually(() => handled.length === 1, 5_000, 'the good message handled')

      const [parked] = transport.peek('orders.yaml.parked')
      expect(parked?.headers['x-acemq-id']).toBe('bad-yaml-1')
      expect(parked?.headers['x-acemq-error']).toMatch(
        /^could not decode: the body is not YAML: Map keys must be unique/,
      )
      expect(handled).toEqual([{ orderId: 'o-3' }])
      expect(transport.messageCount('orders.yaml.dlq')).toBe(0)
    } finally {
      await mq.close({ drainTimeout: 0 })
    }
  })
})
