import 'reflect-metadata'
import { AceMq, ConsumerOptions, InMemoryTransport, Topology } from '@acemq/core'
import { Injectable, Module, Scope, type DynamicModule } from '@nestjs/common'
import { Test } from '@nestjs/testing'
import { describe, expect, it } from 'vitest'
import { AceMqModule, Consume } from '../src/index.js'

/** Bootstraps an application of `imports` and `providers`, closing it again if it starts. */
async function bootstrap(
  imports: DynamicModule[],
  providers: (new (...args: never[]) => object)[] = [],
) {
  @Module({ imports, providers })
  class AppModule {}
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile()
  const app = moduleRef.createNestApplication({ logger: false })
  try {
    await app.init()
  } finally {
    await app.close()
  }
}

const inMemory = () => AceMq.connect(new InMemoryTransport())

describe('bad AceMqModule options are refused with an error naming the option', () => {
  it('forRoot without connect fails the bootstrap, saying what connect should be', async () => {
    await expect(bootstrap([AceMqModule.forRoot({} as never)])).rejects.toThrow(
      /AceMqModule\.forRoot\(options\)\.connect must be a function that opens the connection.*got undefined/,
    )
  })

  it('a misspelt option is refused at once, listing the options', () => {
    expect(() => AceMqModule.forRoot({ connect: inMemory, failfast: true } as never)).toThrow(
      /AceMqModule\.forRoot\(options\)\.failfast is not an option; the options are connect, .*failFast/,
    )
  })

  it('a topology that is not a Topology fails the bootstrap, naming it', async () => {
    await expect(
      bootstrap([AceMqModule.forRoot({ connect: inMemory, topology: { queues: [] } as never })]),
    ).rejects.toThrow(/forRoot\(options\)\.topology must be a Topology .*got an object/)
  })

  it('a shutdown grace in an unknown unit fails the bootstrap, naming it', async () => {
    await expect(
      bootstrap([AceMqModule.forRoot({ connect: inMemory, shutdownGrace: '10 secs' as never })]),
    ).rejects.toThrow(/forRoot\(options\)\.shutdownGrace/)
  })

  it('an empty connection name is refused at once', () => {
    expect(() => AceMqModule.forRoot({ name: '', connect: inMemory })).toThrow(
      /forRoot\(options\)\.name must be a non-empty string; got ""/,
    )
  })

  it('a publisher without a routing key is refused at once, naming it', () => {
    expect(() =>
      AceMqModule.forRoot({
        connect: inMemory,
        publishers: { orders: { exchange: '' } as never },
      }),
    ).toThrow(/forRoot\(options\)\.publishers\.orders\.routingKey must be a string; got undefined/)
  })

  it('a health endpoint path without a leading slash is refused at once', () => {
    expect(() => AceMqModule.forRoot({ connect: inMemory, healthEndpoint: 'health' })).toThrow(
      /healthEndpoint must be true, false or a path starting with '\/'; got "health"/,
    )
  })

  it('what a forRootAsync factory returns is checked at bootstrap, naming the factory', async () => {
    await expect(
      bootstrap([
        AceMqModule.forRootAsync({ useFactory: () => ({ connect: 'amqp://x' }) as never }),
      ]),
    ).rejects.toThrow(
      /forRootAsync\(options\)\.useFactory\(\)\.connect must be a function.*got "amqp:\/\/x"/,
    )
  })

  it('a forRootAsync factory may not return a name: the name is known before the factory runs', async () => {
    await expect(
      bootstrap([
        AceMqModule.forRootAsync({ useFactory: () => ({ connect: inMemory, name: 'b' }) as never }),
      ]),
    ).rejects.toThrow(/useFactory\(\)\.name is not an option/)
  })

  it('two connections with one name fail the bootstrap instead of one being dropped', async () => {
    await expect(
      bootstrap([
        AceMqModule.forRoot({ connect: inMemory }),
        AceMqModule.forRoot({ connect: inMemory }),
      ]),
    ).rejects.toThrow(/two AceMqModule connections are named 'default'/)
  })
})

describe('@Consume() declarations the module cannot serve are refused at bootstrap', () => {
  it('a request-scoped consumer is refused, saying why and what to do instead', async () => {
    @Injectable({ scope: Scope.REQUEST })
    class PerRequest {
      @Consume('q.request')
      handle(): void {}
    }
    await expect(bootstrap([AceMqModule.forTest()], [PerRequest])).rejects.toThrow(
      /@Consume\('q\.request'\) on PerRequest\.handle: the provider is request-scoped .*a message has no HTTP request .*ContextIdFactory\.create\(\)/,
    )
  })

  it('a transient consumer is refused too', async () => {
    @Injectable({ scope: Scope.TRANSIENT })
    class Transient {
      @Consume('q.transient')
      handle(): void {}
    }
    await expect(bootstrap([AceMqModule.forTest()], [Transient])).rejects.toThrow(
      /@Consume\('q\.transient'\) on Transient\.handle: the provider is transient/,
    )
  })

  it('a consumer on a connection no module provides is refused, listing the connections', async () => {
    @Injectable()
    class Audit {
      @Consume('q.audit', { connection: 'audit' })
      handle(): void {}
    }
    await expect(bootstrap([AceMqModule.forTest()], [Audit])).rejects.toThrow(
      /names the connection 'audit', which no AceMqModule provides; the connections are 'default'/,
    )
  })

  it('a consumer of a queue that does not exist fails the bootstrap, naming the method', async () => {
    @Injectable()
    class Missing {
      @Consume('q.not-declared')
      handle(): void {}
    }
    await expect(bootstrap([AceMqModule.forTest()], [Missing])).rejects.toThrow(
      /@Consume\('q\.not-declared'\) on Missing\.handle could not start: .*does not exist/,
    )
  })

  it('bad @Consume() arguments are refused where the class is defined', () => {
    expect(() => Consume('')).toThrow(/@Consume\(queue\) must be a non-empty string; got ""/)
    expect(() => Consume('q', { options: { prefetch: 5 } as never })).toThrow(
      /@Consume\('q', options\)\.options must be a ConsumerOptions or a function/,
    )
    expect(() => Consume('q', { prefetch: 5 } as never)).toThrow(
      /@Consume\('q', options\)\.prefetch is not an option/,
    )
  })

  it('options computed from the provider must be a ConsumerOptions', async () => {
    @Injectable()
    class Computed {
      @Consume('q.computed', { options: () => ({ prefetch: 1 }) as never })
      handle(): void {}
    }
    await expect(
      bootstrap(
        [AceMqModule.forTest({ topology: Topology.define().queue('q.computed') })],
        [Computed],
      ),
    ).rejects.toThrow(/options\(provider\) must return a ConsumerOptions; got an object/)
  })

  it('options computed from the provider see what was injected into it', async () => {
    const seen: unknown[] = []
    @Injectable()
    class Computed {
      readonly prefetch = 7
      @Consume<Computed>('q.computed-ok', {
        options: (self) => {
          seen.push(self.prefetch)
          return ConsumerOptions.defaults().withPrefetch(self.prefetch)
        },
      })
      handle(): void {}
    }
    await bootstrap(
      [AceMqModule.forTest({ topology: Topology.define().queue('q.computed-ok') })],
      [Computed],
    )
    expect(seen).toEqual([7])
  })
})
