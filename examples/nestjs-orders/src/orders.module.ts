// The order service's Nest module: an HTTP controller that publishes, a consumer with retries
// and a Postgres idempotency store (Kysely), and a terminus health check. Every injection names
// its token, so the example runs under tsx, which emits no decorator metadata.
import { setTimeout as sleep } from 'node:timers/promises'
import {
  ConsumerOptions,
  RetryPolicy,
  Topology,
  type HandlerContext,
  type Message,
} from '@acemq/core'
import {
  AceMqHealthIndicator,
  AceMqModule,
  Consume,
  ConnectionPublisher,
  InjectPublisher,
} from '@acemq/nestjs'
import { KyselyIdempotencyStore, idempotencyMigration } from '@acemq/store-kysely'
import { connect } from '@acemq/transport-amqp'
import {
  Body,
  Controller,
  Get,
  HttpCode,
  Inject,
  Injectable,
  Module,
  Post,
  type OnApplicationShutdown,
} from '@nestjs/common'
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus'
import { Kysely, PostgresDialect, sql } from 'kysely'
import pg from 'pg'

export const settings = {
  amqpUrl: process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
  databaseUrl: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
  /** The queue is `{name}.placed`; the tables `{name}_seen` and `{name}_handled`. */
  name: process.env.NAME ?? 'nestjs_orders',
  /** How long handling one order takes. */
  handlerMs: Number(process.env.HANDLER_MS ?? 0),
  concurrency: Number(process.env.CONCURRENCY ?? 4),
  shutdownGrace: Number(process.env.SHUTDOWN_GRACE_MS ?? 10_000),
}
export const queue = `${settings.name}.placed`
const handledTable = `${settings.name}_handled`

export interface OrderPlaced {
  readonly id: string
  readonly total: number
  /** How many times handling it fails before it succeeds (to show the retries). */
  readonly failTimes?: number
}

const policy = RetryPolicy.fixed(3, '200ms')

/** The database: the idempotency store's table and the orders handled, one row per handling. */
@Injectable()
export class Database implements OnApplicationShutdown {
  readonly pool = new pg.Pool({ connectionString: settings.databaseUrl })
  readonly db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: this.pool }) })
  readonly store = new KyselyIdempotencyStore(this.db, { table: `${settings.name}_seen` })

  constructor() {
    this.pool.on('error', (error) =>
      console.warn(`idle Postgres connection lost: ${error.message}`),
    )
  }

  /** In a real service these are migrations. */
  async migrate(): Promise<void> {
    await idempotencyMigration({ table: `${settings.name}_seen` }).up(this.db)
    await sql`create table if not exists ${sql.table(handledTable)} (id text not null, pid integer not null, at timestamptz not null default now())`.execute(
      this.db,
    )
    await this.store.verify()
  }

  async recordHandled(id: string): Promise<void> {
    await sql`insert into ${sql.table(handledTable)} (id, pid) values (${id}, ${process.pid})`.execute(
      this.db,
    )
  }

  // Nest calls this after every onModuleDestroy, so after AceMqModule has drained the
  // handlers that use the pool.
  async onApplicationShutdown(): Promise<void> {
    await this.store.close()
    await this.db.destroy()
  }
}

@Module({ providers: [Database], exports: [Database] })
export class DatabaseModule {}

@Injectable()
export class OrdersConsumer {
  readonly #attempts = new Map<string, number>()

  constructor(@Inject(Database) readonly database: Database) {}

  @Consume<OrdersConsumer>(queue, {
    options: (self) =>
      ConsumerOptions.defaults()
        .withRetry(policy)
        .idempotent(self.database.store)
        .withConcurrency(settings.concurrency)
        .withPrefetch(settings.concurrency * 2),
  })
  async placed(message: Message<OrderPlaced>, { signal }: HandlerContext): Promise<void> {
    const order = message.payload
    const attempt = (this.#attempts.get(order.id) ?? 0) + 1
    this.#attempts.set(order.id, attempt)
    console.log(`${order.id}: attempt ${attempt} started`)
    if (attempt <= (order.failTimes ?? 0)) throw new Error(`${order.id}: payment service timed out`)
    // The work: abandoned (and the message put back) if the shutdown grace runs out first.
    await sleep(settings.handlerMs, undefined, { signal })
    await this.database.recordHandled(order.id)
    console.log(`${order.id}: handled`)
  }
}

@Controller()
export class OrdersController {
  constructor(
    @InjectPublisher('orders') private readonly orders: ConnectionPublisher<OrderPlaced>,
    @Inject(HealthCheckService) private readonly health: HealthCheckService,
    @Inject(AceMqHealthIndicator) private readonly acemq: AceMqHealthIndicator,
  ) {}

  /** Publishes the order and answers once the broker has confirmed it. */
  @Post('orders')
  @HttpCode(202)
  async place(@Body() order: OrderPlaced): Promise<{ accepted: string }> {
    await this.orders.send(order, { id: order.id })
    return { accepted: order.id }
  }

  @Get('health')
  @HealthCheck()
  check() {
    return this.health.check([() => this.acemq.isHealthy('acemq')])
  }
}

@Module({
  imports: [
    TerminusModule,
    DatabaseModule,
    AceMqModule.forRootAsync({
      imports: [DatabaseModule],
      inject: [Database],
      useFactory: (database: Database) => ({
        connect: () => connect(settings.amqpUrl, { connectionName: settings.name }),
        topology: Topology.define().queueWithRetry(queue, policy),
        healthContributors: [database.store.healthContributor()],
        shutdownGrace: settings.shutdownGrace,
        onConnected: () => database.migrate(),
      }),
      publishers: { orders: { exchange: '', routingKey: queue } },
    }),
  ],
  controllers: [OrdersController],
  providers: [OrdersConsumer],
})
export class OrdersModule {}
