import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { ConfigurationError } from '@acemq/core'
import { createConsoleHandler, type ConsoleOptions } from './console-handler.js'
import { isLoopback } from './security.js'

/** Options of {@link serveConsole}. */
export interface ServeConsoleOptions extends ConsoleOptions {
  /** The address to listen on (default `127.0.0.1`). */
  readonly host?: string
  /** The port (default 0: any free one). */
  readonly port?: number
}

/** A console running on its own. */
export interface ConsoleServer {
  /** `http://host:port`. */
  readonly url: string
  close(): Promise<void>
}

/**
 * Runs the console alone on an HTTP server. With `insecureLoopbackOnly` it must be bound to a
 * loopback address, or it refuses to start.
 *
 * @example
 * ```ts
 * const server = await serveConsole({ archive, token, port: 8080 })
 * ```
 */
export async function serveConsole(options: ServeConsoleOptions): Promise<ConsoleServer> {
  const host = options.host ?? '127.0.0.1'
  if (options.insecureLoopbackOnly === true && !isLoopback(host) && host !== 'localhost') {
    throw new ConfigurationError(
      `insecureLoopbackOnly needs a loopback host; got host '${host}': give a token or an authorize hook`,
    )
  }
  const server = http.createServer(createConsoleHandler(options))
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port ?? 0, host, () => resolve())
  })
  const { port } = server.address() as AddressInfo
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
