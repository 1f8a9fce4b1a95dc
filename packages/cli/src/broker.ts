import { passwordSpan } from '@acemq/core/spi'

/** The broker an answer is about: its URL without the password, and the virtual host. */
export interface BrokerAbout {
  /** The URL with its password replaced by `***`. */
  readonly broker: string
  /** The virtual host the URL names (`/` when it names none). */
  readonly vhost: string
}

/**
 * What every answer about a broker starts with, so an answer from the wrong broker or virtual
 * host is never taken for the one meant (an empty list from the default vhost is not "all empty").
 *
 * @example
 * ```ts
 * brokerAbout('amqp://ops:s3cret@rabbit:5672/orders') // { broker: 'amqp://ops:***@rabbit:5672/orders', vhost: 'orders' }
 * ```
 */
export function brokerAbout(url: string): BrokerAbout {
  const span = passwordSpan(url)
  const broker = span === undefined ? url : `${url.slice(0, span.start)}***${url.slice(span.end)}`
  return { broker, vhost: vhostOf(url, span?.end) }
}

/** `broker amqp://ops:***@rabbit:5672/orders, vhost orders`. */
export function describeBroker(about: BrokerAbout): string {
  return `broker ${about.broker}, vhost ${about.vhost}`
}

/** The path of the URL after its authority, decoded; `/` for none (amqplib's default). */
function vhostOf(url: string, passwordEnd: number | undefined): string {
  const schemeEnd = url.indexOf('://')
  if (schemeEnd < 0) return '/'
  const authorityStart = passwordEnd ?? schemeEnd + 3
  const slash = url.indexOf('/', authorityStart)
  if (slash < 0) return '/'
  const path = url.slice(slash + 1).split(/[?#]/)[0] ?? ''
  if (path === '') return '/'
  try {
    return decodeURIComponent(path)
  } catch {
    return path
  }
}
