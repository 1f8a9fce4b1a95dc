// Run as a child process by the "leaves nothing behind" test: it must exit by itself after
// close(), which proves the transport left no socket, timer or listener holding the event loop.
import { AmqpTransport } from '../../src/index.js'

const url = process.env['EXIT_CHECK_URL'] ?? ''
const queue = process.env['EXIT_CHECK_QUEUE'] ?? ''

const transport = new AmqpTransport(url, { connectionName: 'acemq-exit-check' })
await transport.connect()
let received = 0
await transport.consume(queue, { prefetch: 1 }, (delivery) => {
  received += 1
  delivery.ack()
})
await transport.publish({
  exchange: '',
  routingKey: queue,
  body: Buffer.from('exit check'),
  headers: {},
  properties: {},
  persistent: true,
  mandatory: true,
})
while (received === 0) await new Promise((resolve) => setTimeout(resolve, 10))
await transport.close()
console.log(`received ${received}`)
console.log('closed')
