import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'

/** A Fastify app listening on an ephemeral port. */
export interface Served {
  readonly url: string
  readonly app: FastifyInstance
  close(): Promise<void>
}

/** Builds an app with `setup`, listens on port 0 and returns its base URL. */
export async function serve(
  setup: (app: FastifyInstance) => Promise<void>,
  options: FastifyServerOptions = {},
): Promise<Served> {
  const app = Fastify(options)
  await setup(app)
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  return { url, app, close: () => app.close() }
}
