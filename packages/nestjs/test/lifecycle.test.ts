import 'reflect-metadata'
import { setTimeout as sleep } from 'node:timers/promises'
import { AceMq, InMemoryTransport, Topology, type HandlerContext, type Message } from '@acemq/core'
import { Controller, Get, Inject, Injectable, Module, type OnModuleInit } from '@nestjs/common'
import type { INestApplication } from '@nestjs/common'
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus'
import { Test } from '@nestjs/testing'
import { afterEach, describe, expect, it, vi } from 'vitest'
import {
  AceMqConnection,
  AceMqHealthIndicator,
  AceMqModule,
  Consume,
  ConnectionPublisher,
  InjectAceMq,
  InjectPublisher,
  getAceMqToken,
} from '../src/index.js'

const topology = Topology.define().queue('work')

@Injectable()
class Work {
  readonly started: string[] = []
  readonly finished: string[] = []
  /** Set by onModuleInit after a wait: a handler must never see it unset. */
  ready = false
  readonly readyWhenHandled: boolean[] = []
  delayMs = 0

  @Consume('work')
  async handle(message: Message<{ id: string }>, { signal }: HandlerContext): Promise<void> {
    this.readyWhenHandled.push(this.ready)
    this.started.push(message.payload.id)
    await sleep(this.delayMs, undefined, { signal })
    this.finished.push(message.payload.id)
  }
}

@Injectable()
class SlowInit implements OnModuleInit {
  constructor(@Inject(Work) private readonly work: Work) {}
  async onModuleInit(): Promise<void> {
    await sleep(100)
    this.work.ready = true
  }
}

@Controller()
class TerminusHealth {
  constructor(
    @Inject(HealthCheckService) private readonly health: HealthCheckService,
    @Inject(AceMqHealthIndicator) private readonly acemq: AceMqHealthIndicator,
  ) {}

  @Get('health')
  @HealthCheck()
  check() {
    return this.health.check([() => this.acemq.isHealthy('acemq')])
  }
}

const apps: INestApplication[] = []
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close()
})

async function listen(
  acemq: ReturnType<typeof AceMqModule.forRoot>,
  providers: (new (...args: never[]) => object)[] = [Work],
): Promise<{ app: INestApplication; url: string }> {
  @Module({
    imports: [acemq, TerminusModule],
    controllers: [TerminusHealth],
    providers,
  })
  class AppModule {}
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile()
  const app = moduleRef.createNestApplication({ logger: false })
  apps.push(app)
  await app.listen(0, '127.0.0.1')
  return { app, url: (await app.getUrl()).replace('[::1]', '127.0.0.1') }
}

async function getJson(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(url)
  return { status: response.status, body: (await response.json()) as Record<string, unknown> }
}

describe('when consumers start', () => {
  it('a message already queued is handled only after every onModuleInit finished', async () => {
    const transport = new InMemoryTransport()
    const seed = await AceMq.connect(transport)
    await seed.applyTopology(topology)
    await seed.publisher('', 'work').send({ id: 'early' })
    const { app } = await listen(AceMqModule.forTest({ transport, topology }), [Work, SlowInit])
    const work = app.get(Work)
    await vi.waitFor(() => expect(work.finished).toEqual(['early']))
    expect(work.readyWhenHandled).toEqual([true])
  })
})

describe('after the connection is lost', () => {
  it('consumers keep consuming after the connection is lost and recovered', async () => {
    const transport = new InMemoryTransport()
    const { app } = await listen(AceMqModule.forTest({ transport, topology }))
    const work = app.get(Work)
    const mq = app.get<AceMqConnection>(getAceMqToken()).mq
    await mq.publisher('', 'work').send({ id: 'before' })
    await vi.waitFor(() => expect(work.finished).toEqual(['before']))
    await transport.simulateConnectionLoss(50)
    await vi.waitFor(async () => expect((await mq.health()).status).toBe('UP'))
    await mq.publisher('', 'work').send({ id: 'after' })
    await vi.waitFor(() => expect(work.finished).toEqual(['before', 'after']))
  })
})

describe('a broker that is down at start', () => {
  it('does not fail the bootstrap: health is DOWN, and consumers start when the broker comes', async () => {
    const transport = new InMemoryTransport()
    let brokerUp = false
    const { app, url } = await listen(
      AceMqModule.forRoot({
        connect: async () => {
          if (!brokerUp) throw new Error('connect ECONNREFUSED amqp://app:s3cret@rabbit:5672')
          return AceMq.connect(transport)
        },
        topology,
        connectRetry: { initialDelay: 20, maxDelay: 50 },
        healthEndpoint: true,
      }),
    )
    const plain = await getJson(`${url}/acemq-health`)
    expect(plain.status).toBe(503)
    expect(plain.body).toMatchObject({
      status: 'DOWN',
      components: { connection: { status: 'DOWN' } },
    })
    expect(JSON.stringify(plain.body)).toContain('amqp://app:***@rabbit')
    expect(JSON.stringify(plain.body)).not.toContain('s3cret')
    const terminus = await getJson(`${url}/health`)
    expect(terminus.status).toBe(503)
    expect(terminus.body).toMatchObject({ status: 'error', error: { acemq: { status: 'down' } } })
    const connection = app.get<AceMqConnection>(getAceMqToken())
    expect(() => connection.mq).toThrow(/AceMQ connection 'default' is not connected yet/)

    brokerUp = true
    await connection.whenConnected()
    await connection.mq.publisher('', 'work').send({ id: 'after' })
    await vi.waitFor(() => expect(app.get(Work).finished).toEqual(['after']))
    expect((await getJson(`${url}/acemq-health`)).status).toBe(200)
    expect((await getJson(`${url}/health`)).body).toMatchObject({
      status: 'ok',
      info: { acemq: { status: 'up', connection: { status: 'UP' }, consumers: { status: 'UP' } } },
    })
  })

  it('fails the bootstrap with failFast, saying why', async () => {
    await expect(
      listen(
        AceMqModule.forRoot({
          connect: () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:1')),
          failFast: true,
        }),
      ),
    ).rejects.toThrow(
      /AceMQ connection 'default' could not be made at start \(failFast\): connect ECONNREFUSED/,
    )
  })
})

describe('closing while the connection is still being tried', () => {
  it('stops trying: an attempt that fails after app.close() is not retried, and whenConnected() rejects', async () => {
    const warnings: string[] = []
    const logger = {
      log: () => undefined,
      error: () => undefined,
      warn: (message: unknown) => void warnings.push(String(message)),
    }
    let attempts = 0
    let failPending: (error: Error) => void = () => undefined
    @Module({
      imports: [
        AceMqModule.forRoot({
          connect: () => {
            attempts++
            if (attempts === 1) return Promise.reject(new Error('connect ECONNREFUSED'))
            return new Promise((_resolve, reject) => (failPending = reject))
          },
          connectRetry: { initialDelay: 10, maxDelay: 10 },
        }),
      ],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile()
    const app = moduleRef.createNestApplication({ logger })
    await app.init()
    await vi.waitFor(() => expect(attempts).toBe(2))
    const waiting = app
      .get<AceMqConnection>(getAceMqToken())
      .whenConnected()
      .catch((error: unknown) => error)
    const closing = app.close()
    await sleep(50) // the module's shutdown has begun and waits for the attempt
    failPending(new Error('connect ETIMEDOUT'))
    await closing
    await sleep(50)
    expect(attempts).toBe(2)
    expect(warnings.filter((w) => w.includes('ETIMEDOUT'))).toEqual([])
    expect(await waiting).toMatchObject({
      code: 'ACEMQ_CLOSED',
      message: "AceMQ connection 'default' was closed before it was made",
    })
  })
})

describe('health', () => {
  it('a DEGRADED connection is degraded for terminus, still 200', async () => {
    const transport = new InMemoryTransport()
    const { app, url } = await listen(AceMqModule.forTest({ transport, topology }))
    const connection = app.get<AceMqConnection>(getAceMqToken())
    connection.mq.registerHealth({
      name: 'ordered:ledger',
      report: () => ({ name: 'ordered:ledger', status: 'DEGRADED', details: { halted: '1' } }),
    })
    const terminus = await getJson(`${url}/health`)
    expect(terminus.status).toBe(200)
    expect(terminus.body).toMatchObject({
      status: 'degraded',
      info: {
        acemq: { status: 'degraded', 'ordered:ledger': { status: 'DEGRADED', halted: '1' } },
      },
    })
  })
})

describe('shutdown', () => {
  it('app.close() waits for a running handler, which finishes and is acked', async () => {
    const transport = new InMemoryTransport()
    const { app } = await listen(AceMqModule.forTest({ transport, topology, shutdownGrace: '5s' }))
    const work = app.get(Work)
    work.delayMs = 300
    await app.get<AceMqConnection>(getAceMqToken()).mq.publisher('', 'work').send({ id: 'w-1' })
    await vi.waitFor(() => expect(work.started).toEqual(['w-1']))
    apps.splice(apps.indexOf(app), 1)
    await app.close()
    expect(work.finished).toEqual(['w-1'])
    expect(transport.messageCount('work')).toBe(0)
    expect(transport.unackedCount('work')).toBe(0)
  })

  it('a handler that outlives the grace is aborted and its message is put back on the queue', async () => {
    const transport = new InMemoryTransport()
    const { app } = await listen(AceMqModule.forTest({ transport, topology, shutdownGrace: 100 }))
    const work = app.get(Work)
    work.delayMs = 60_000
    await app.get<AceMqConnection>(getAceMqToken()).mq.publisher('', 'work').send({ id: 'w-2' })
    await vi.waitFor(() => expect(work.started).toEqual(['w-2']))
    apps.splice(apps.indexOf(app), 1)
    const started = Date.now()
    await app.close()
    expect(Date.now() - started).toBeLessThan(5_000)
    expect(work.finished).toEqual([])
    expect(transport.messageCount('work')).toBe(1)
  })
})

describe('a handler running while the application shuts down', () => {
  it('can still publish through an injected publisher: the drain lets its work complete', async () => {
    const transport = new InMemoryTransport()

    @Injectable()
    class Relay {
      constructor(@InjectPublisher('done') private readonly done: ConnectionPublisher<string>) {}
      readonly started: string[] = []

      @Consume('relay.in')
      async handle(message: Message<string>): Promise<void> {
        this.started.push(message.payload)
        await sleep(200)
        await this.done.send(`${message.payload} done`)
      }
    }

    const { app } = await listen(
      AceMqModule.forTest({
        transport,
        topology: Topology.define().queue('relay.in').queue('relay.done'),
        publishers: { done: { exchange: '', routingKey: 'relay.done' } },
      }),
      [Relay],
    )
    await app.get<AceMqConnection>(getAceMqToken()).mq.publisher('', 'relay.in').send('r-1')
    await vi.waitFor(() => expect(app.get(Relay).started).toEqual(['r-1']))
    apps.splice(apps.indexOf(app), 1)
    await app.close()
    expect(transport.peek('relay.done').map((m) => Buffer.from(m.body).toString())).toEqual([
      '"r-1 done"',
    ])
    expect(transport.messageCount('relay.in') + transport.unackedCount('relay.in')).toBe(0)
  })
})

describe('several named connections', () => {
  it('each consumer and publisher is on the connection it names', async () => {
    const orders = new InMemoryTransport()
    const audit = new InMemoryTransport()
    const handled: string[] = []

    @Injectable()
    class Consumers {
      @Consume('orders')
      order(message: Message<string>): void {
        handled.push(`orders:${message.payload}`)
      }

      @Consume('audit', { connection: 'audit' })
      audit(message: Message<string>): void {
        handled.push(`audit:${message.payload}`)
      }
    }

    @Injectable()
    class Senders {
      constructor(
        @InjectPublisher('orders') readonly orders: ConnectionPublisher<string>,
        @InjectPublisher('audit', 'audit') readonly audit: ConnectionPublisher<string>,
        @InjectAceMq('audit') readonly auditConnection: AceMqConnection,
      ) {}
    }

    @Module({
      imports: [
        AceMqModule.forTest({
          transport: orders,
          topology: Topology.define().queue('orders'),
          publishers: { orders: { exchange: '', routingKey: 'orders' } },
        }),
        AceMqModule.forTest({
          name: 'audit',
          transport: audit,
          topology: Topology.define().queue('audit'),
          publishers: { audit: { exchange: '', routingKey: 'audit' } },
        }),
      ],
      providers: [Consumers, Senders],
    })
    class TwoConnections {}
    const moduleRef = await Test.createTestingModule({ imports: [TwoConnections] }).compile()
    const both = moduleRef.createNestApplication({ logger: false })
    apps.push(both)
    await both.init()
    const senders = both.get(Senders)
    expect(senders.auditConnection.name).toBe('audit')
    await senders.orders.send('o-1')
    await senders.audit.send('a-1')
    await vi.waitFor(() =>
      expect(handled.filter((h) => h.endsWith('-1')).sort()).toEqual(['audit:a-1', 'orders:o-1']),
    )
    expect(orders.hasQueue('audit')).toBe(false)
    expect(audit.hasQueue('orders')).toBe(false)
  })
})
