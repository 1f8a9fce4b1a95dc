import { ConfigurationError, ConsumerOptions, type Handler } from '@acemq/core'
import { Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common'
import type { DiscoveryService, MetadataScanner } from '@nestjs/core'
import { AceMqConnection, type ConsumerRegistration } from '../ace-mq-connection.js'
import { consumeMetadataOf, type ConsumeMetadata } from '../consume.js'
import { describeValue } from '../module-options.js'

type Wrapper = ReturnType<DiscoveryService['getProviders']>[number]

/**
 * The lifecycle of one connection inside the application: at `onApplicationBootstrap` it
 * finds the `@Consume()` methods meant for its connection and starts them with the
 * connection; at `onModuleDestroy` (the first step of `app.close()`, which a signal triggers
 * after `enableShutdownHooks()`) it drains the handlers for the grace and closes.
 */
export class ConnectionLifecycle implements OnApplicationBootstrap, OnModuleDestroy {
  readonly #connection: AceMqConnection
  readonly #discovery: DiscoveryService
  readonly #scanner: MetadataScanner

  constructor(connection: AceMqConnection, discovery: DiscoveryService, scanner: MetadataScanner) {
    this.#connection = connection
    this.#discovery = discovery
    this.#scanner = scanner
  }

  async onApplicationBootstrap(): Promise<void> {
    const consumers = this.#discover()
    await this.#connection.start(consumers)
  }

  async onModuleDestroy(): Promise<void> {
    await this.#connection.shutdown()
  }

  #discover(): ConsumerRegistration[] {
    const wrappers = [...this.#discovery.getProviders(), ...this.#discovery.getControllers()]
    const names = connectionNames(wrappers)
    const found: ConsumerRegistration[] = []
    for (const wrapper of wrappers) {
      const prototype = prototypeOf(wrapper)
      if (prototype === undefined) continue
      for (const method of this.#scanner.getAllMethodNames(prototype)) {
        const declared = consumeMetadataOf((prototype as Record<string, unknown>)[method])
        for (const metadata of declared) {
          const label = `${wrapper.name === undefined ? 'provider' : String(wrapper.name)}.${method}`
          if (!names.has(metadata.connection)) {
            throw new ConfigurationError(
              `@Consume('${metadata.queue}') on ${label} names the connection '${metadata.connection}', which no AceMqModule provides; the connections are ${[...names].map((n) => `'${n}'`).join(', ') || 'none'}`,
            )
          }
          if (metadata.connection !== this.#connection.name) continue
          found.push(registration(wrapper, method, metadata, label))
        }
      }
    }
    return found
  }
}

function registration(
  wrapper: Wrapper,
  method: string,
  metadata: ConsumeMetadata,
  label: string,
): ConsumerRegistration {
  if (wrapper.isTransient || !wrapper.isDependencyTreeStatic()) {
    throw new ConfigurationError(
      `@Consume('${metadata.queue}') on ${label}: the provider is ${wrapper.isTransient ? 'transient' : 'request-scoped (or depends on a request-scoped provider)'}, and a message has no HTTP request to scope it to. Make it a singleton (the default scope); for per-message state, resolve a request-scoped provider in the handler with moduleRef.resolve(token, ContextIdFactory.create())`,
    )
  }
  const instance = wrapper.instance as Record<string, unknown> | undefined
  const fn = instance?.[method]
  if (instance === undefined || typeof fn !== 'function') {
    throw new ConfigurationError(`@Consume('${metadata.queue}') on ${label}: no instance to call`)
  }
  let options = metadata.options
  if (typeof options === 'function') {
    options = options(instance)
    if (!(options instanceof ConsumerOptions)) {
      throw new ConfigurationError(
        `@Consume('${metadata.queue}') on ${label}: options(provider) must return a ConsumerOptions; got ${describeValue(options)}`,
      )
    }
  }
  const handler: Handler<unknown> = (message, context) =>
    (fn as Handler<unknown>).call(instance, message, context)
  return { label, queue: metadata.queue, options, handler }
}

function prototypeOf(wrapper: Wrapper): object | undefined {
  // A class provider: its prototype, even before (or without) an instance.
  if (typeof wrapper.metatype === 'function' && wrapper.inject == null) {
    return wrapper.metatype.prototype as object
  }
  const instance: unknown = wrapper.instance
  if (typeof instance !== 'object' || instance === null) return undefined
  return Object.getPrototypeOf(instance) as object
}

function connectionNames(wrappers: readonly Wrapper[]): Set<string> {
  const seen = new Set<AceMqConnection>()
  const names = new Set<string>()
  for (const wrapper of wrappers) {
    const instance: unknown = wrapper.instance
    if (!(instance instanceof AceMqConnection) || seen.has(instance)) continue
    seen.add(instance)
    if (names.has(instance.name)) {
      throw new ConfigurationError(
        `two AceMqModule connections are named '${instance.name}'; give each AceMqModule.forRoot() its own name`,
      )
    }
    names.add(instance.name)
  }
  return names
}

/** The module's log lines, through Nest's logger. */
export const logger = new Logger('AceMq')
