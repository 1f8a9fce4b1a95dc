import net from 'node:net'

/** The broker the integration tests use; `AMQP_URL` overrides it. */
export const AMQP_URL = process.env['AMQP_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672'

/** The Postgres the integration tests use; `DATABASE_URL` overrides it. */
export const DATABASE_URL = process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test'

/** The MySQL or MariaDB the Kysely store's MySQL tests use; `MYSQL_URL` overrides it. */
export const MYSQL_URL = process.env['MYSQL_URL'] ?? 'mysql://root@127.0.0.1:3306/test'

/** The Redis a Redis store's tests use; `REDIS_URL` overrides it. */
export const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379'

function reachable(url: string, defaultPort: number): Promise<boolean> {
  const { hostname, port } = new URL(url)
  return new Promise((resolve) => {
    const socket = net.connect({ host: hostname, port: Number(port || defaultPort) })
    const done = (ok: boolean): void => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(2_000, () => done(false))
    socket.once('connect', () => done(true))
    socket.once('error', () => done(false))
  })
}

/**
 * The opt-out: `ACEMQ_SKIP_SERVICES=1` lets the tests that need a missing service skip (the run
 * then says how many it dropped, see services-reporter.ts). Without it a missing service fails
 * the tests that need it, on every machine: a green run never means they did not run.
 */
export const SKIP_SERVICES_VARIABLE = 'ACEMQ_SKIP_SERVICES'

/**
 * Whether a missing service skips its tests: `ACEMQ_SKIP_SERVICES=1`, and not in CI. Under
 * `CI=true` the opt-out does not apply, so a green CI run never means a test did not run.
 */
export function skippingMissingServices(): boolean {
  return process.env[SKIP_SERVICES_VARIABLE] === '1' && !inCi()
}

function inCi(): boolean {
  const ci = process.env['CI']
  return ci !== undefined && ci !== '' && ci !== '0' && ci.toLowerCase() !== 'false'
}

/**
 * True when `url` accepts a TCP connection (`port` when the URL names none). When it does not,
 * this throws, so the tests that need the service fail loudly — unless `ACEMQ_SKIP_SERVICES=1`
 * outside CI,
 * when it prints why and answers false, and the caller skips (`describe.runIf(available)`).
 *
 * @example
 * const available = await requireService('Redis', REDIS_URL, 6379, 'redis-server --daemonize yes')
 * describe.runIf(available)('my store on Redis', () => { ... })
 */
export async function requireService(
  name: string,
  url: string,
  port: number,
  howToStart: string,
): Promise<boolean> {
  if (await reachable(url, port)) return true
  const reason = `${name} is not reachable at ${new URL(url).host} (start it with: ${howToStart})`
  if (!skippingMissingServices()) {
    const optOut = inCi()
      ? `CI=true: ${SKIP_SERVICES_VARIABLE} does not apply in CI`
      : `set ${SKIP_SERVICES_VARIABLE}=1 to skip them instead`
    throw new Error(`${reason}; the tests that need it fail (${optOut})`)
  }
  console.warn(`${SKIP_SERVICES_VARIABLE}=1: skipping the tests that need ${name}: ${reason}`)
  return false
}

/** True when RabbitMQ answers; a missing broker throws unless ACEMQ_SKIP_SERVICES=1. */
export function requireRabbit(): Promise<boolean> {
  return requireService('RabbitMQ', AMQP_URL, 5672, 'rabbitmq-server -detached')
}

/** True when Postgres answers; a missing database throws unless ACEMQ_SKIP_SERVICES=1. */
export function requirePostgres(): Promise<boolean> {
  return requireService(
    'PostgreSQL',
    DATABASE_URL,
    5432,
    'pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start',
  )
}

/** True when MySQL (or MariaDB) answers; a missing server throws unless ACEMQ_SKIP_SERVICES=1. */
export function requireMysql(): Promise<boolean> {
  return requireService('MariaDB', MYSQL_URL, 3306, '/etc/init.d/mariadb start')
}

/** True when Redis answers; a missing server throws unless ACEMQ_SKIP_SERVICES=1. */
export function requireRedis(): Promise<boolean> {
  return requireService('Redis', REDIS_URL, 6379, 'redis-server --daemonize yes')
}

/** A name no other test (or earlier run) uses. */
export function uniqueName(prefix: string): string {
  return `${prefix}.${Math.random().toString(36).slice(2, 10)}`
}
