import 'reflect-metadata'
import {
  ConsumerOptions,
  FatalError,
  InMemoryIdempotencyStore,
  InMemoryTransport,
  RetryPolicy,
  Topology,
  type HandlerContext,
  type Message,
} from '@acemq/core'
import { Inject, Injectable, Module } from '@nestjs/common'
import { Test } from '@nestjs/testing'
import { afterEach, describe, expect, it, vi } from 'vitest'
import {
  AceMqConnection,
  AceMqModule,
  Consume,
  ConnectionPublisher,
  InjectAceMq,
  InjectPublisher,
} from '../src/index.js'

interface OrderPlaced {
  readonly id: string
  readonly fail?: 'once' | 'always' | 'fatal'
}

const policy = RetryPolicy.fixed(3, 1)
const topology = Topology.define().queueWithRetry('orders.placed', policy).queue('audit.events')

/** Something injected into the consumer: handlers run inside Nest's DI. */
@Injectable()
class Ledger {
  readonly handled: string[] = []
  readonly attempts = new Map<string, number>()
}

@Injectable()
class OrdersConsumer {
  constructor(@Inject(Ledger) readonly ledger: Ledger) {}

  @Consume('orders.placed', {
    options: ConsumerOptions.defaults()
      .withRetry(policy)
      .idempotent(new InMemoryIdempotencyStore()),
  })
  async placed(message: Message<OrderPlaced>, context: HandlerContext): Promise<void> {
    const { id, fail } = message.payload
    const attempt = (this.ledger.attempts.get(id) ?? 0) + 1
    this.ledger.attempts.set(id, attempt)
    expect(context.signal).toBeInstanceOf(AbortSignal)
    if (fail === 'fatal') throw new FatalError(`order ${id} is malformed`)
    if (fail === 'always' || (fail === 'once' && attempt === 1))
      throw new Error(`order ${id} failed`)
    this.ledger.handled.push(id)
  }
}

@Injectable()
class OrdersService {
  constructor(
    @InjectPublisher('orders') readonly orders: ConnectionPublisher<OrderPlaced>,
    @InjectAceMq() readonly acemq: AceMqConnection,
  ) {}
}

async function start(transport = new InMemoryTransport()) {
  @Module({
    imports: [
      AceMqModule.forTest({
        transport,
        topology,
        publishers: { orders: { exchange: '', routingKey: 'orders.placed' } },
      }),
    ],
    providers: [Ledger, OrdersConsumer, OrdersService],
  })
  class AppModule {}
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile()
  const app = moduleRef.createNestApplication({ logger: false })
  await app.init()
  opened.push(app)
  return { app, transport, ledger: app.get(Ledger), service: app.get(OrdersService) }
}

const opened: { close(): Promise<void> }[] = []
afterEach(async () => {
  for (const app of opened.splice(0)) await app.close()
})

describe('AceMqModule.forTest (in-memory transport, no broker)', () => {
  it('a @Consume() method of a provider gets what an injected publisher sent', async () => {
    const { ledger, service } = await start()
    await service.orders.send({ id: 'o-1' }, { id: 'o-1' })
    await vi.waitFor(() => expect(ledger.handled).toEqual(['o-1']))
  })

  it('a handler that throws is retried by the retry policy, as in plain code', async () => {
    const { ledger, service } = await start()
    await service.orders.send({ id: 'o-2', fail: 'once' }, { id: 'o-2' })
    await vi.waitFor(() => expect(ledger.handled).toEqual(['o-2']))
    expect(ledger.attempts.get('o-2')).toBe(2)
  })

  it('a handler that keeps failing ends on the dead-letter queue with its reason', async () => {
    const { ledger, service, transport } = await start()
    await service.orders.send({ id: 'o-3', fail: 'always' }, { id: 'o-3' })
    await vi.waitFor(() => expect(transport.messageCount('orders.placed.dlq')).toBe(1))
    expect(ledger.attempts.get('o-3')).toBe(3)
    const dead = transport.peek('orders.placed.dlq')[0]
    expect(JSON.stringify(dead?.headers)).toContain('order o-3 failed')
  })

  it('a copy delivered twice is handled once with an idempotency store', async () => {
    const { ledger, service } = await start()
    await service.orders.send({ id: 'o-4' }, { id: 'o-4' })
    await service.orders.send({ id: 'o-4' }, { id: 'o-4' })
    await service.orders.send({ id: 'o-5' }, { id: 'o-5' })
    await vi.waitFor(() => expect(ledger.handled).toEqual(['o-4', 'o-5']))
  })

  it('the injected connection is the AceMq once the application is initialised', async () => {
    const { service } = await start()
    expect(service.acemq.connected).toBe(true)
    expect((await service.acemq.health()).status).toBe('UP')
    await service.acemq.mq.publisher('', 'audit.events').send({ seen: true })
  })

  it('closing the application closes the connection, and publishing after says it is closed', async () => {
    const { app, service } = await start()
    opened.splice(opened.indexOf(app), 1)
    await app.close()
    expect(service.acemq.connected).toBe(false)
    await expect(service.orders.send({ id: 'late' })).rejects.toMatchObject({
      code: 'ACEMQ_CLOSED',
    })
  })
})
