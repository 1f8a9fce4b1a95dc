import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import express, { type Express } from 'express'

/** An Express app listening on an ephemeral port. */
export interface Served {
  readonly url: string
  close(): Promise<void>
}

/** Builds an app with `setup`, listens on port 0 and returns its base URL. */
export async function serve(setup: (app: Express) => void): Promise<Served> {
  const app = express()
  setup(app)
  return listen(app.listen(0, '127.0.0.1'))
}

/** Waits for `server` to listen and returns its base URL and a closer. */
export async function listen(server: Server): Promise<Served> {
  await new Promise<void>((resolve, reject) => {
    if (server.listening) resolve()
    server.once('listening', resolve)
    server.once('error', reject)
  })
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections()
        server.close((error) => (error ? reject(error) : resolve()))
      }),
  }
}
