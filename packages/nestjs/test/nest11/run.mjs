// The package's source in a Nest 11 application (no decorator syntax here: plain JavaScript
// calls Nest's decorators, as the package does). Prints one JSON line for test/nest11.test.ts.
import 'reflect-metadata'
import { readFile } from 'node:fs/promises'
import { URL } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { InMemoryTransport, Topology } from '@acemq/core'
import { Injectable, Module, Scope } from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { AceMqModule, Consume, InjectPublisher } from '../../src/index.ts'

const nestVersion = JSON.parse(
  await readFile(new URL('./package.json', import.meta.resolve('@nestjs/core')), 'utf8'),
).version

const handled = []
class Consumer {
  async handle(message) {
    handled.push({ id: message.payload.id, started: Date.now() })
    await sleep(message.payload.ms)
    handled.at(-1).finished = true
  }
}
Injectable()(Consumer)
Consume('nest11.work')(
  Consumer.prototype,
  'handle',
  Object.getOwnPropertyDescriptor(Consumer.prototype, 'handle'),
)

class Sender {
  constructor(publisher) {
    this.publisher = publisher
  }
}
Injectable()(Sender)
InjectPublisher('work')(Sender, undefined, 0)

const transport = new InMemoryTransport()
class AppModule {}
Module({
  imports: [
    AceMqModule.forTest({
      transport,
      topology: Topology.define().queue('nest11.work'),
      publishers: { work: { exchange: '', routingKey: 'nest11.work' } },
      shutdownGrace: '5s',
    }),
  ],
  providers: [Consumer, Sender],
})(AppModule)

const app = await NestFactory.createApplicationContext(AppModule, { logger: false })
await app.get(Sender).publisher.send({ id: 'n-1', ms: 0 })
await app.get(Sender).publisher.send({ id: 'n-2', ms: 300 })
while (handled.length < 2) await sleep(10)
await app.close() // drains n-2
const drained =
  handled.every((h) => h.finished === true) && transport.unackedCount('nest11.work') === 0

// A request-scoped consumer is refused at bootstrap on Nest 11 too.
class PerRequest {
  handle() {}
}
Injectable({ scope: Scope.REQUEST })(PerRequest)
Consume('nest11.request')(
  PerRequest.prototype,
  'handle',
  Object.getOwnPropertyDescriptor(PerRequest.prototype, 'handle'),
)
class RefusedModule {}
Module({ imports: [AceMqModule.forTest()], providers: [PerRequest] })(RefusedModule)
let refused = ''
try {
  const refusedApp = await NestFactory.createApplicationContext(RefusedModule, {
    logger: false,
    abortOnError: false,
  })
  await refusedApp.close()
} catch (error) {
  refused = error.message
}
console.log(JSON.stringify({ nestVersion, handled: handled.map((h) => h.id), drained, refused }))
