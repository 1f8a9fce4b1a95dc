import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import express from 'express'
import { shutdownOnSignals } from '@acemq/core'
import { acemqHealth } from '@acemq/health-express'
import { connect } from '@acemq/transport-amqp'

const mq = await connect(process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672')

const app = express()
app.use(acemqHealth(mq)) // GET /acemq-health: 200 while UP or DEGRADED, 503 when DOWN
const server = app.listen(Number(process.env.PORT ?? 0), '127.0.0.1')
await once(server, 'listening')
const { port } = server.address() as AddressInfo
const endpoint = `http://127.0.0.1:${port}/acemq-health`
console.log(`serving ${endpoint}`)

if (process.env.KEEP_RUNNING === '1') {
  shutdownOnSignals(mq) // Ctrl-C: drain, close, exit
} else {
  // Ask once, as an orchestrator's probe would, then stop.
  const response = await fetch(endpoint)
  console.log(`GET /acemq-health → ${response.status} ${await response.text()}`)
  server.close()
  await mq.close()
}
