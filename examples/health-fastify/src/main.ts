import Fastify from 'fastify'
import { shutdownOnSignals } from '@acemq/core'
import { acemqHealth } from '@acemq/health-fastify'
import { connect } from '@acemq/transport-amqp'

const mq = await connect(process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672')

const app = Fastify()
await app.register(acemqHealth, { mq }) // GET /acemq-health: 200 while UP or DEGRADED, 503 when DOWN
const address = await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' })
const endpoint = `${address}/acemq-health`
console.log(`serving ${endpoint}`)

if (process.env.KEEP_RUNNING === '1') {
  shutdownOnSignals(mq) // Ctrl-C: drain, close, exit
} else {
  // Ask once, as an orchestrator's probe would, then stop.
  const response = await fetch(endpoint)
  console.log(`GET /acemq-health → ${response.status} ${await response.text()}`)
  await app.close()
  await mq.close()
}
