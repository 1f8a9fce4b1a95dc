// rascal ships no types; this is the slice the benchmark uses.
declare module 'rascal' {
  import type { EventEmitter } from 'node:events'

  namespace rascal {
    interface SubscriptionSession extends EventEmitter {
      cancel(): Promise<void>
    }
    type PublicationSession = EventEmitter
    class BrokerAsPromised extends EventEmitter {
      static create(config: object): Promise<BrokerAsPromised>
      subscribe(name: string, overrides?: object): Promise<SubscriptionSession>
      publish(
        name: string,
        message: unknown,
        overrides?: string | object,
      ): Promise<PublicationSession>
      shutdown(): Promise<void>
    }
    function withDefaultConfig(config: object): object
  }
  const rascal: {
    readonly BrokerAsPromised: typeof rascal.BrokerAsPromised
    withDefaultConfig(config: object): object
  }
  export = rascal
}
