import { describe, expect, it } from 'vitest'
import { AMQP_URL } from '@acemq/testing'
import { LOCK_WAIT_TIMEOUT, withoutBrokerFaults } from './broker-lock.js'
import { answeredHealth, freePort } from './health-server.js'
import { expectRepeatable } from './repeatable.js'
import { runExample, startExample } from './run-example.js'

/**
 * What both health examples must do against the broker: answer one request to themselves and
 * exit 0, or keep serving until SIGTERM. `available` is `await requireRabbit()`.
 */
export function healthExampleSuite(
  name: 'health-express' | 'health-fastify',
  available: boolean,
): void {
  describe.runIf(available)(`the ${name} example`, () => {
    it(
      'serves GET /acemq-health, answers one request to itself with 200 UP, and exits 0',
      async () => {
        const { code, output } = await withoutBrokerFaults(() =>
          runExample(name, { AMQP_URL, PORT: '0' }),
        )

        expect(code, output).toBe(0)
        expect(output).toMatch(/^serving http:\/\/127\.0\.0\.1:\d+\/acemq-health$/m)
        const { status, body } = answeredHealth(output)
        expect(status).toBe(200)
        expect(body).toMatchObject({
          status: 'UP',
          inFlight: 0,
          components: { connection: { status: 'UP', open: 'true', blocked: 'false' } },
        })
        expect(output).not.toContain('guest:guest@')
      },
      LOCK_WAIT_TIMEOUT + 60_000,
    )

    it(
      'with KEEP_RUNNING=1 keeps serving on PORT until SIGTERM, then exits 0',
      async () => {
        await withoutBrokerFaults(async () => {
          const port = await freePort()
          const example = startExample(name, {
            AMQP_URL,
            PORT: String(port),
            KEEP_RUNNING: '1',
          })
          try {
            await example.waitFor(
              new RegExp(`^serving http://127\\.0\\.0\\.1:${port}/acemq-health$`),
            )
            const response = await fetch(`http://127.0.0.1:${port}/acemq-health`)
            expect(response.status).toBe(200)
            expect(await response.json()).toMatchObject({ status: 'UP' })
          } finally {
            example.process.kill('SIGTERM')
          }
          expect(await example.exited(), example.output()).toBe(0)
        })
      },
      LOCK_WAIT_TIMEOUT + 60_000,
    )

    it(
      'runs twice with the same output',
      async () => {
        await withoutBrokerFaults(() => expectRepeatable(name, { AMQP_URL, PORT: '0' }))
      },
      LOCK_WAIT_TIMEOUT + 90_000,
    )
  })
}
