import { InMemoryTransport } from '../src/index.js'
import type { Delivery, TransportConsumeOptions, TransportSubscription } from '../src/spi.js'

/**
 * An in-memory broker that refuses to consume the queue named `refused`, 20 ms after it is
 * asked, as a broker answers: the other consumers started beside it are running by then (the
 * ordered queue's partitions, the pipeline's steps).
 */
export class RefusingTransport extends InMemoryTransport {
  refused = ''

  override consume(
    queue: string,
    options: TransportConsumeOptions,
    onDelivery: (delivery: Delivery) => void,
  ): Promise<TransportSubscription> {
    if (queue === this.refused) {
      return new Promise((_, reject) =>
        setTimeout(() => reject(new Error(`cannot consume ${queue}`)), 20),
      )
    }
    return super.consume(queue, options, onDelivery)
  }
}
