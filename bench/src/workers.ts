import type { Worker } from './comparisons/comparison.js'

/**
 * Finds a worker by name, loading only the comparison it belongs to: a child process starts
 * faster without the drivers the other comparisons need.
 */
export async function findWorker(name: string): Promise<Worker | undefined> {
  const prefix = name.slice(0, name.indexOf(':'))
  switch (prefix) {
    case 'consume':
      return (await import('./comparisons/consume.js')).consume.workers[name]
    case 'publish':
      return (await import('./comparisons/publish.js')).publish.workers[name]
    case 'idempotent':
      return (await import('./comparisons/idempotent.js')).idempotent.workers[name]
    case 'retry':
    case 'close':
      return (await import('./comparisons/retry.js')).retry.workers[name]
    case 'memory':
      return (await import('./comparisons/rss.js')).rss.workers[name]
    case 'ordered':
      return (await import('./comparisons/ordered.js')).ordered.workers[name]
    case 'outbox':
      return (await import('./comparisons/outbox.js')).outbox.workers[name]
    case 'rpc':
      return (await import('./comparisons/rpc.js')).rpc.workers[name]
    case 'ceiling':
      return (await import('./comparisons/ceiling.js')).ceiling.workers[name]
    case 'latency':
      return (await import('./comparisons/latency.js')).latency.workers[name]
    case 'scaleout':
      return (await import('./comparisons/scaleout.js')).scaleout.workers[name]
    case 'curve':
      return (await import('./curves/workers.js')).workers[name]
    case 'experiment':
      if (name === 'experiment:als-consume') {
        return (await import('./experiments/als-consume.js')).workers[name]
      }
      if (name === 'experiment:consume-alloc') {
        return (await import('./experiments/consume-alloc.js')).workers[name]
      }
      if (name === 'experiment:nodelay-acks') {
        return (await import('./experiments/nodelay-acks.js')).workers[name]
      }
      return (await import('./experiments/store-overhead.js')).workers[name]
    default:
      return undefined
  }
}
