import { transportParity } from '@acemq/testing'
import { InMemoryTransport } from '../../src/index.js'

/** The parity suite on the in-memory transport: the assertions RabbitMQ passes, unchanged. */
transportParity('InMemoryTransport', {
  async connect() {
    const transport = new InMemoryTransport()
    await transport.connect()
    return transport
  },
  async readyCount(transport, queue) {
    const memory = transport as InMemoryTransport
    return memory.hasQueue(queue) ? memory.messageCount(queue) : undefined
  },
})
