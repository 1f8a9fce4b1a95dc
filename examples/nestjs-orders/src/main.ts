// A NestJS order service on AceMQ: POST /orders publishes, a consumer handles each order once
// (retries, Postgres idempotency), GET /health is terminus, and SIGTERM drains the handlers
// before the connection closes (app.enableShutdownHooks()).
import 'reflect-metadata'
import { NestFactory } from '@nestjs/core'
import { OrdersModule, queue } from './orders.module.js'

const app = await NestFactory.create(OrdersModule, { logger: ['error', 'warn'] })
app.enableShutdownHooks()
await app.listen(Number(process.env.PORT ?? 0), '127.0.0.1')
console.log(`consuming ${queue}`)
console.log(`listening on ${(await app.getUrl()).replace('[::1]', '127.0.0.1')}`)
process.on('exit', (code) => console.log(`exiting (${code})`))
