import net from 'node:net'
import { expect } from 'vitest'

/** The line a health example prints once it answered its own request, parsed. */
export function answeredHealth(output: string): { status: number; body: Record<string, unknown> } {
  const match = /^GET \/acemq-health → (\d{3}) (.+)$/m.exec(output)
  expect(match, output).not.toBeNull()
  return { status: Number(match?.[1]), body: JSON.parse(match?.[2] ?? '{}') }
}

/** A TCP port nothing listens on right now. */
export async function freePort(): Promise<number> {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as net.AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}
