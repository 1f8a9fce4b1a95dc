import { AceMq, ConfigurationError, InMemoryTransport } from '@acemq/core'
import {
  Module,
  type DynamicModule,
  type InjectionToken,
  type ModuleMetadata,
  type Provider,
} from '@nestjs/common'
import { DiscoveryModule, DiscoveryService, MetadataScanner } from '@nestjs/core'
import { AceMqConnection } from './ace-mq-connection.js'
import { AceMqHealthIndicator, healthController } from './ace-mq-health-indicator.js'
import { ConnectionLifecycle, logger } from './internal/consumer-discovery.js'
import {
  CONNECTION_OPTION_KEYS,
  DEFAULT_CONNECTION_NAME,
  checkModuleShape,
  describeValue,
  resolveConnectionOptions,
  type AceMqConnectionOptions,
  type AceMqModuleOptions,
  type PublisherDefinition,
  type ResolvedConnectionOptions,
} from './module-options.js'
import { getAceMqToken, getPublisherToken, optionsToken } from './tokens.js'

/**
 * Options of `AceMqModule.forRootAsync`: the connection's options come from a factory with
 * injected dependencies (a `ConfigService`, a Kysely instance for a store).
 *
 * @example
 * ```ts
 * AceMqModule.forRootAsync({
 *   imports: [ConfigModule],
 *   inject: [ConfigService],
 *   useFactory: (config: ConfigService) => ({ connect: () => connect(config.get('AMQP_URL')) }),
 * })
 * ```
 */
export interface AceMqModuleAsyncOptions {
  /** The connection's name (default `'default'`). */
  readonly name?: string
  readonly imports?: ModuleMetadata['imports']
  readonly inject?: readonly InjectionToken[]
  /** Returns the connection's options; checked at bootstrap. */
  readonly useFactory: (
    ...args: never[]
  ) => AceMqConnectionOptions | Promise<AceMqConnectionOptions>
  /** Publishers to inject with `@InjectPublisher(key, connection?)`, by key. */
  readonly publishers?: Readonly<Record<string, PublisherDefinition>>
  /** `true` or a path: serve `GET /acemq-health` (or that path) from a controller. */
  readonly healthEndpoint?: boolean | string
}

/**
 * Options of `AceMqModule.forTest`: a connection on the in-memory transport.
 *
 * @example
 * ```ts
 * AceMqModule.forTest({ topology: Topology.define().queue('orders.placed') })
 * ```
 */
export interface AceMqTestModuleOptions extends Omit<AceMqModuleOptions, 'connect'> {
  /** The in-memory transport to connect through (default: a new one); keep it to look inside. */
  readonly transport?: InMemoryTransport
}

const ASYNC_KEYS = new Set([
  'name',
  'imports',
  'inject',
  'useFactory',
  'publishers',
  'healthEndpoint',
])
const TEST_KEYS = new Set([
  ...CONNECTION_OPTION_KEYS,
  'name',
  'publishers',
  'healthEndpoint',
  'transport',
])

/**
 * AceMQ in a Nest application: one module per connection (`name` tells several apart), global,
 * so its connection, publishers and health indicator are injectable everywhere. At
 * `onApplicationBootstrap` it connects, declares the topology and starts every `@Consume()`
 * handler of its connection; `app.close()` (or a signal after `app.enableShutdownHooks()`)
 * drains running handlers for `shutdownGrace`, then closes. A broker down at start does not
 * fail the bootstrap unless `failFast`: health says `DOWN` and the connection is tried again.
 *
 * @example
 * ```ts
 * @Module({
 *   imports: [AceMqModule.forRoot({ connect: () => connect('amqp://localhost'), topology })],
 *   providers: [OrdersConsumer],
 * })
 * class AppModule {}
 * ```
 */
export class AceMqModule {
  /** A connection from options known when the module is defined. Checked at bootstrap. */
  static forRoot(options: AceMqModuleOptions): DynamicModule {
    const shape = checkModuleShape(options, 'AceMqModule.forRoot(options)')
    const optionsProvider: Provider = {
      provide: optionsToken(shape.name),
      useFactory: () => resolveConnectionOptions(options, 'AceMqModule.forRoot(options)'),
    }
    return build(shape, optionsProvider, [])
  }

  /** A connection whose options a factory makes, with injected dependencies. */
  static forRootAsync(options: AceMqModuleAsyncOptions): DynamicModule {
    const where = 'AceMqModule.forRootAsync(options)'
    const shape = checkModuleShape(options, where, ASYNC_KEYS)
    if (typeof options.useFactory !== 'function') {
      throw new ConfigurationError(
        `${where}.useFactory must be a function returning the connection's options; got ${describeValue(options.useFactory)}`,
      )
    }
    if (options.inject !== undefined && !Array.isArray(options.inject)) {
      throw new ConfigurationError(
        `${where}.inject must be an array of tokens; got ${describeValue(options.inject)}`,
      )
    }
    const factory = options.useFactory as (...args: unknown[]) => unknown
    const optionsProvider: Provider = {
      provide: optionsToken(shape.name),
      inject: [...(options.inject ?? [])],
      useFactory: async (...args: unknown[]) => {
        const made = await factory(...args)
        checkModuleShape(made, `${where}.useFactory()`, CONNECTION_OPTION_KEYS)
        return resolveConnectionOptions(made, `${where}.useFactory()`)
      },
    }
    return build(shape, optionsProvider, options.imports ?? [])
  }

  /**
   * A connection on the in-memory transport of `@acemq/core`, for an application's tests: the
   * same consumers, retries, dead letters and health, no broker.
   */
  static forTest(options: AceMqTestModuleOptions = {}): DynamicModule {
    const where = 'AceMqModule.forTest(options)'
    const shape = checkModuleShape(options, where, TEST_KEYS)
    const { transport, ...rest } = options
    if (transport !== undefined && !(transport instanceof InMemoryTransport)) {
      throw new ConfigurationError(
        `${where}.transport must be an InMemoryTransport; got ${describeValue(transport)}`,
      )
    }
    const optionsProvider: Provider = {
      provide: optionsToken(shape.name),
      useFactory: () =>
        resolveConnectionOptions(
          { ...rest, connect: () => AceMq.connect(transport ?? new InMemoryTransport()) },
          where,
        ),
    }
    return build(shape, optionsProvider, [])
  }
}

function build(
  shape: ReturnType<typeof checkModuleShape>,
  optionsProvider: Provider,
  imports: NonNullable<ModuleMetadata['imports']>,
): DynamicModule {
  const { name } = shape
  const connectionToken = getAceMqToken(name)
  const providers: Provider[] = [
    optionsProvider,
    {
      provide: connectionToken,
      inject: [optionsToken(name)],
      useFactory: (resolved: ResolvedConnectionOptions) =>
        new AceMqConnection(name, resolved, (message) => logger.warn(message)),
    },
    {
      provide: `acemq:lifecycle:${name}`,
      inject: [connectionToken, DiscoveryService, MetadataScanner],
      useFactory: (
        connection: AceMqConnection,
        discovery: DiscoveryService,
        scanner: MetadataScanner,
      ) => new ConnectionLifecycle(connection, discovery, scanner),
    },
    AceMqHealthIndicator,
  ]
  const exported: InjectionToken[] = [connectionToken, AceMqHealthIndicator]
  if (name === DEFAULT_CONNECTION_NAME) {
    providers.push({ provide: AceMqConnection, useExisting: connectionToken })
    exported.push(AceMqConnection)
  }
  for (const [key, definition] of Object.entries(shape.publishers)) {
    const token = getPublisherToken(key, name)
    providers.push({
      provide: token,
      inject: [connectionToken],
      useFactory: (connection: AceMqConnection) =>
        connection.publisher(definition.exchange, definition.routingKey, definition.options ?? {}),
    })
    exported.push(token)
  }
  return {
    module: AceMqModule,
    global: true,
    imports: [DiscoveryModule, ...imports],
    providers,
    exports: exported,
    controllers: shape.healthPath === undefined ? [] : [healthController(shape.healthPath, name)],
  }
}

// Applied as a call, like every Nest decorator in this package (see ace-mq-health-indicator.ts).
Module({})(AceMqModule)
