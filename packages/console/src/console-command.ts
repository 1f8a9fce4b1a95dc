import { parseArgs } from 'node:util'
import {
  ConfigurationError,
  DeadLetterArchive,
  type AceMq,
  type DeadLetterArchiveStore,
} from '@acemq/core'
import { describeError, redactUrl } from '@acemq/core/spi'
import type { ConsoleQueue } from './pages.js'
import { serveConsole, type ConsoleServer } from './serve-console.js'

/** The environment variable the token is read from, so it never sits in a process list. */
// eslint-disable-next-line no-restricted-syntax -- an environment variable's name, not an error code
export const TOKEN_VARIABLE = 'ACEMQ_CONSOLE_TOKEN'

const USAGE = `Usage: acemq-console --url <amqp-url> --archive <sqlite:file | postgres://… | mysql://…> [options]

Serves the dead-letter console, collecting the named queues into the archive.
  --url <url>             the broker (or AMQP_URL)
  --archive <where>       the archive: sqlite:<file> (tables created), or postgres:// / mysql://
                          (tables created with --create-tables)
  --queues <a.dlq,b.dlq>  the .dlq and .parked queues to collect and list
  --management-url <url>  list the vhost's .dlq and .parked queues through the management API
                          (and collect them all when --queues is not given)
  --create-tables         create the archive's tables on Postgres or MySQL first
  --read-only             pages only; every action refused
  --host <host>           default 127.0.0.1;  --port <n> default 8080
  --insecure-loopback     no sign-in, loopback only; otherwise ${TOKEN_VARIABLE} must hold a token
Exit codes: 0 stopped; 1 failed; 2 usage error.`

/** What a running `acemq-console` holds, to stop it. */
export interface RunningConsole {
  readonly server: ConsoleServer
  stop(): Promise<void>
}

/**
 * Runs `acemq-console` with `args` (without `node` and the script): connects, opens the
 * archive, starts collecting and serves the console. The transport and the stores are optional
 * peers, loaded by name only here, so mounting the console needs none of them.
 */
export async function runConsoleCommand(
  args: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<RunningConsole> {
  const { values } = parseArgs({
    args: [...args],
    options: {
      url: { type: 'string' },
      archive: { type: 'string' },
      queues: { type: 'string' },
      'management-url': { type: 'string' },
      'create-tables': { type: 'boolean', default: false },
      'read-only': { type: 'boolean', default: false },
      host: { type: 'string', default: '127.0.0.1' },
      port: { type: 'string', default: '8080' },
      'insecure-loopback': { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  })
  if (values.help) throw new UsageHelp(USAGE)
  const url = values.url ?? env['AMQP_URL']
  if (url === undefined) throw new ConfigurationError(`--url (or AMQP_URL) is required\n${USAGE}`)
  if (values.archive === undefined) throw new ConfigurationError(`--archive is required\n${USAGE}`)
  const port = Number(values.port)
  if (!Number.isSafeInteger(port) || port < 0 || port > 65_535) {
    throw new ConfigurationError(`--port must be a port number; got ${JSON.stringify(values.port)}`)
  }
  const token = env[TOKEN_VARIABLE]
  const insecure = values['insecure-loopback']
  if (!insecure && (token === undefined || token === '')) {
    throw new ConfigurationError(
      `the console refuses to start without a token in ${TOKEN_VARIABLE}, or --insecure-loopback (loopback only)`,
    )
  }
  const queues = (values.queues ?? '')
    .split(',')
    .map((q) => q.trim())
    .filter((q) => q !== '')
  const { store, close: closeStore } = await openStore(values.archive, values['create-tables'])
  let mq: AceMq | undefined
  try {
    const amqp = (await load('@acemq/transport-amqp', 'the broker')) as AmqpModule
    mq = await amqp.connect(url, { connectionName: 'acemq-console' })
    const connection = mq
    const management = values['management-url']
    const discover =
      management === undefined
        ? undefined
        : async (): Promise<ConsoleQueue[]> =>
            amqp.discoverDeadLetterQueues(amqp.managementEndpoint(url, management), vhostOf(url))
    if (queues.length === 0 && discover !== undefined) {
      queues.push(...(await discover()).map((q) => q.queue))
    }
    const archive = new DeadLetterArchive({ transport: connection.transport, store })
    const collector = await archive.collect(queues)
    const server = await serveConsole({
      archive,
      host: values.host,
      port,
      readOnly: values['read-only'],
      health: () => connection.health(),
      queues:
        discover ??
        (async () =>
          Promise.all(
            queues.map(async (queue) => ({
              queue,
              messages: await connection.transport.queueLength?.(queue).catch(() => undefined),
            })),
          )),
      ...(insecure ? { insecureLoopbackOnly: true } : { token: token as string }),
    })
    return {
      server,
      async stop() {
        await server.close()
        await collector.close()
        await connection.close()
        await closeStore()
      },
    }
  } catch (error) {
    await mq?.close().catch(() => undefined)
    await closeStore()
    throw error
  }
}

/** What this command uses of `@acemq/transport-amqp`, loaded by name. */
interface AmqpModule {
  connect(url: string, options: object): Promise<AceMq>
  managementEndpoint(url: string, explicit?: string): object
  discoverDeadLetterQueues(endpoint: object, vhost: string): Promise<ConsoleQueue[]>
}

/** The virtual host an AMQP URL names (`/` when none). */
function vhostOf(url: string): string {
  const path = new URL(url).pathname.slice(1)
  return path === '' ? '/' : decodeURIComponent(path)
}

/** `--help` was asked for: the usage, printed with exit code 0. */
export class UsageHelp extends Error {}

async function openStore(
  where: string,
  createTables: boolean,
): Promise<{ store: DeadLetterArchiveStore; close(): Promise<void> }> {
  if (where.startsWith('sqlite:')) {
    const { SqliteArchiveStore } = (await load('@acemq/store-sqlite', 'a SQLite archive')) as {
      SqliteArchiveStore: new (path: string) => DeadLetterArchiveStore & { close(): void }
    }
    const store = new SqliteArchiveStore(where.slice('sqlite:'.length))
    return { store, close: async () => store.close() }
  }
  const dialect =
    where.startsWith('postgres://') || where.startsWith('postgresql://')
      ? 'postgres'
      : where.startsWith('mysql://')
        ? 'mysql'
        : undefined
  if (dialect === undefined) {
    throw new ConfigurationError(
      `--archive must be sqlite:<file>, postgres://… or mysql://…; got '${redactUrl(where)}'`,
    )
  }
  const kysely = (await load('kysely', 'a SQL archive')) as Record<
    string,
    new (o: object) => object
  >
  const { KyselyArchiveStore } = (await load('@acemq/store-kysely', 'a SQL archive')) as {
    KyselyArchiveStore: new (
      db: object,
    ) => DeadLetterArchiveStore & { createTables(): Promise<void> }
  }
  let dialectObject: object
  if (dialect === 'postgres') {
    const pg = (await load('pg', 'a Postgres archive')) as {
      default: { Pool: new (o: object) => object }
    }
    dialectObject = new (kysely['PostgresDialect'] as new (o: object) => object)({
      pool: new pg.default.Pool({ connectionString: where }),
    })
  } else {
    const mysql = (await load('mysql2', 'a MySQL archive')) as { createPool(o: object): object }
    dialectObject = new (kysely['MysqlDialect'] as new (o: object) => object)({
      pool: mysql.createPool({ uri: where, charset: 'utf8mb4' }),
    })
  }
  const db = new (kysely['Kysely'] as new (o: object) => { destroy(): Promise<void> })({
    dialect: dialectObject,
  })
  const store = new KyselyArchiveStore(db)
  if (createTables) await store.createTables()
  return { store, close: () => db.destroy() }
}

/**
 * Optional peers are imported by a name held in a variable, so neither the type checker nor a
 * bundler pulls them into an app that only mounts the console.
 */
async function load(name: string, what: string): Promise<unknown> {
  try {
    return await import(name)
  } catch (error) {
    throw new ConfigurationError(
      `${what} needs '${name}', which is not installed: npm install ${name} (an optional peer dependency of @acemq/console) — ${describeError(error)}`,
    )
  }
}
