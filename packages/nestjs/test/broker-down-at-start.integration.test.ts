import 'reflect-metadata'
import net from 'node:net'
import { AceMq, Topology, type Message } from '@acemq/core'
import { requireRabbit, uniqueName } from '@acemq/testing'
import { AmqpTransport } from '@acemq/transport-amqp'
import { Injectable, Module, type INestApplication } from '@nestjs/common'
import { Test } from '@nestjs/testing'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import { AceMqConnection, AceMqModule, Consume, getAceMqToken } from '../src/index.js'

const hasRabbit = await requireRabbit()

/** A port nothing listens on yet: the broker's address until the forwarder opens it. */
async function freePort(): Promise<number> {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as net.AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** Forwards `port` to the real broker: "the broker comes". */
async function forward(port: number, to: URL): Promise<net.Server> {
  const sockets = new Set<net.Socket>()
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(to.port || 5672), to.hostname)
    for (const socket of [client, upstream]) {
      sockets.add(socket)
      socket.on('error', () => undefined)
      socket.on('close', () => sockets.delete(socket))
    }
    client.pipe(upstream).pipe(client)
  })
  server.on('close', () => {
    for (const socket of sockets) socket.destroy()
  })
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
  return server
}

describe.runIf(hasRabbit)('a RabbitMQ that is down when the Nest application starts', () => {
  let vhost: BrokerVhost
  beforeAll(async () => {
    vhost = await BrokerVhost.create('acemq-nestjs-down-at-start')
  })
  afterAll(async () => {
    await vhost?.delete()
  })

  it('the application boots with health DOWN, then consumes once the broker is reachable', async () => {
    const queue = uniqueName('nestjs.down-at-start')
    const port = await freePort()
    const url = new URL(vhost.url)
    const viaPort = new URL(vhost.url)
    viaPort.hostname = '127.0.0.1'
    viaPort.port = String(port)
    const handled: string[] = []

    @Injectable()
    class Consumer {
      @Consume(queue)
      handle(message: Message<string>): void {
        handled.push(message.payload)
      }
    }

    @Module({
      imports: [
        AceMqModule.forRoot({
          connect: () =>
            AceMq.connect(new AmqpTransport(viaPort.toString(), { connectTimeout: '2s' })),
          topology: Topology.define().queue(queue),
          connectRetry: { initialDelay: 100, maxDelay: 200 },
        }),
      ],
      providers: [Consumer],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile()
    const app: INestApplication = moduleRef.createNestApplication({ logger: false })
    let forwarder: net.Server | undefined
    try {
      await app.init()
      const connection = app.get<AceMqConnection>(getAceMqToken())
      const down = await connection.health()
      expect(down.status).toBe('DOWN')
      expect(down.reports[0]?.details.error).toMatch(/ECONNREFUSED|refused|connect/i)
      expect(JSON.stringify(down)).not.toContain('guest:guest')

      forwarder = await forward(port, url)
      const mq = await connection.whenConnected()
      expect((await connection.health()).status).toBe('UP')
      await mq.publisher('', queue).send('after the broker came')
      await vi.waitFor(() => expect(handled).toEqual(['after the broker came']), {
        timeout: 10_000,
      })
    } finally {
      await app.close()
      await new Promise((resolve) => forwarder?.close(resolve) ?? resolve(undefined))
    }
  }, 60_000)
})
