import { createConsoleHandler, type ConsoleOptions } from './console-handler.js'

/** The slice of a Fastify instance the plugin uses. */
export interface FastifyLike {
  all(path: string, handler: (request: { raw: unknown }, reply: FastifyReplyLike) => void): unknown
  addContentTypeParser(
    type: string,
    parser: (
      request: unknown,
      payload: unknown,
      done: (error: null, body?: unknown) => void,
    ) => void,
  ): unknown
}

/** The slice of a Fastify reply the plugin uses. */
export interface FastifyReplyLike {
  readonly raw: unknown
  hijack(): void
}

/**
 * The console as a Fastify plugin: `app.register(acemqConsolePlugin, { prefix: '/console', ...options })`.
 * Fastify hands the raw request over unread; `basePath` defaults to the prefix.
 *
 * @example
 * ```ts
 * await app.register(acemqConsolePlugin, { prefix: '/console', archive, token })
 * ```
 */
export async function acemqConsolePlugin(
  app: FastifyLike,
  options: ConsoleOptions & { readonly prefix?: string },
): Promise<void> {
  const handler = createConsoleHandler({ basePath: options.prefix ?? '', ...options })
  // The console reads its own form bodies from the raw stream.
  app.addContentTypeParser('application/x-www-form-urlencoded', (_request, _payload, done) =>
    done(null),
  )
  const route = (request: { raw: unknown }, reply: FastifyReplyLike): void => {
    reply.hijack()
    handler(
      request.raw as Parameters<typeof handler>[0],
      reply.raw as Parameters<typeof handler>[1],
    )
  }
  app.all('/', route)
  app.all('/*', route)
}
