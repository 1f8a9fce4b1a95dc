import net from 'node:net'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { SKIP_SERVICES_VARIABLE, requireService, skippingMissingServices } from '../src/index.js'

/** A local port nothing listens on: one the system gave out and took back. */
async function closedPort(): Promise<number> {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as net.AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

/** A local port something listens on, until `close()`. */
async function openPort(): Promise<{ port: number; close(): Promise<void> }> {
  const server = net.createServer((socket) => socket.destroy())
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as net.AddressInfo
  return { port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

describe('requireService', () => {
  afterEach(() => {
    vi.unstubAllEnvs()
    vi.restoreAllMocks()
  })

  it('answers true when the service accepts a connection', async () => {
    const server = await openPort()
    try {
      await expect(
        requireService('Thing', `thing://127.0.0.1:${server.port}`, 1, 'thing start'),
      ).resolves.toBe(true)
    } finally {
      await server.close()
    }
  })

  it('fails the tests when the service is missing, naming it, its address and how to start it', async () => {
    vi.stubEnv('CI', '')
    vi.stubEnv(SKIP_SERVICES_VARIABLE, '')
    const port = await closedPort()
    await expect(
      requireService('Thing', `thing://127.0.0.1:${port}`, 1, 'thing start'),
    ).rejects.toThrow(
      `Thing is not reachable at 127.0.0.1:${port} (start it with: thing start); the tests that need it fail (set ACEMQ_SKIP_SERVICES=1 to skip them instead)`,
    )
  })

  it('with ACEMQ_SKIP_SERVICES=1 outside CI, says why and answers false so the tests skip', async () => {
    vi.stubEnv('CI', '')
    vi.stubEnv(SKIP_SERVICES_VARIABLE, '1')
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined)
    const port = await closedPort()
    expect(skippingMissingServices()).toBe(true)
    await expect(
      requireService('Thing', `thing://127.0.0.1:${port}`, 1, 'thing start'),
    ).resolves.toBe(false)
    expect(warn).toHaveBeenCalledWith(
      expect.stringMatching(/^ACEMQ_SKIP_SERVICES=1: skipping the tests that need Thing: /),
    )
  })

  it('under CI=true fails even with ACEMQ_SKIP_SERVICES=1: a green CI run never hides a skipped test', async () => {
    vi.stubEnv('CI', 'true')
    vi.stubEnv(SKIP_SERVICES_VARIABLE, '1')
    const port = await closedPort()
    expect(skippingMissingServices()).toBe(false)
    await expect(
      requireService('Thing', `thing://127.0.0.1:${port}`, 1, 'thing start'),
    ).rejects.toThrow(/\(CI=true: ACEMQ_SKIP_SERVICES does not apply in CI\)$/)
  })

  it('uses the default port when the URL names none', async () => {
    vi.stubEnv('CI', '')
    vi.stubEnv(SKIP_SERVICES_VARIABLE, '')
    const port = await closedPort()
    await expect(requireService('Thing', 'thing://127.0.0.1', port, 'thing start')).rejects.toThrow(
      `Thing is not reachable at 127.0.0.1 (start it with: thing start)`,
    )
  })
})
