import fs from 'node:fs'
import net from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AceMqError } from '@acemq/core'
import { startRabbitNode } from '../../../test-support/rabbitmq-node.js'
import type { RabbitNode } from '../../../test-support/rabbitmq-node.js'
import { requireRabbit, uniqueName } from '@acemq/testing'
import { generateTlsCertificates } from '../../../test-support/tls-certs.js'
import type { TlsCertificates } from '../../../test-support/tls-certs.js'
import { connect } from '../src/index.js'
import type { AmqpTlsOptions } from '../src/index.js'
import { Harness, collector, eventually, message, text } from './support/harness.js'

const hasRabbit = await requireRabbit()

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })
}

/** The connections a node holds: user, login mechanism, TLS, client-provided name. */
async function connections(
  node: RabbitNode,
): Promise<{ user: string; auth_mechanism: string; ssl: boolean; name: string }[]> {
  const rows = JSON.parse(
    await node.ctl(
      'list_connections',
      'user',
      'auth_mechanism',
      'ssl',
      'client_properties',
      '--formatter',
      'json',
      '--quiet',
    ),
  ) as { user: string; auth_mechanism: string; ssl: boolean; client_properties: unknown[] }[]
  return rows.map((row) => {
    const entry = row.client_properties.find(
      (property) => Array.isArray(property) && property[0] === 'connection_name',
    ) as unknown[] | undefined
    return { ...row, name: String(entry?.[2] ?? '') }
  })
}

/**
 * A node of its own with a TLS listener on certificates the test generates (a CA, the broker's
 * certificate for localhost / 127.0.0.1, an expired one, a client certificate), which asks for
 * a client certificate (`verify_peer`) and takes RabbitMQ's `EXTERNAL` login from the
 * `rabbitmq_auth_mechanism_ssl` plugin that ships with it.
 */
describe.runIf(hasRabbit)('AmqpTransport over TLS', () => {
  const harness = new Harness()
  let certs: TlsCertificates | undefined
  let node: RabbitNode | undefined
  let url = ''
  let port = 0

  beforeAll(async () => {
    certs = await generateTlsCertificates('acemq-client')
    port = await freePort()
    node = await startRabbitNode({
      prefix: 'acemq-tls',
      plugins: ['rabbitmq_auth_mechanism_ssl'],
      // The user the client certificate logs in as: no password, so only EXTERNAL lets it in.
      passwordlessUsers: ['acemq-client'],
      config: {
        'listeners.ssl.1': `127.0.0.1:${port}`,
        'ssl_options.cacertfile': certs.ca.certFile,
        'ssl_options.certfile': certs.server.certFile,
        'ssl_options.keyfile': certs.server.keyFile,
        'ssl_options.verify': 'verify_peer',
        'ssl_options.fail_if_no_peer_cert': 'false',
        'auth_mechanisms.1': 'PLAIN',
        'auth_mechanisms.2': 'EXTERNAL',
        ssl_cert_login_from: 'common_name',
      },
    })
    url = `amqps://guest:guest@127.0.0.1:${port}`
  }, 90_000)

  afterAll(async () => {
    await harness.closeAll()
    await node?.stop()
    certs?.remove()
  })

  /** The first connect's error with these TLS options (it must fail). */
  async function refusal(tls: AmqpTlsOptions, target = url): Promise<AceMqError> {
    harness.url = target
    const transport = harness.create({ tls, connectTimeout: 5_000 })
    const error = await transport.connect().then(
      () => undefined,
      (caught: unknown) => caught,
    )
    expect(error).toBeInstanceOf(AceMqError)
    expect((error as AceMqError).code).toBe('ACEMQ_CONNECTION_FAILED')
    return error as AceMqError
  }

  it('publishes and consumes over a verified connection, and health names the amqps:// node', async () => {
    const ca = certs?.ca.cert ?? ''
    const mq = await connect(url, { tls: { ca }, connectionName: 'acemq-tls-verified' })
    try {
      const transport = mq.transport
      const queue = uniqueName('tls')
      await transport.declare([
        { kind: 'queue', name: queue, type: 'classic', durable: true, arguments: {} },
      ])
      const { deliveries, onDelivery } = collector()
      await transport.consume(queue, { prefetch: 1 }, onDelivery)
      await transport.publish(message(queue, 'over TLS'))
      await eventually(() => deliveries.length === 1)
      expect(text(deliveries[0] as never)).toBe('over TLS')
      const connection = (await mq.health()).reports.find((report) => report.name === 'connection')
      expect(connection?.details['transport']).toBe(`amqp amqps://guest:***@127.0.0.1:${port}`)
    } finally {
      await mq.close()
    }
  })

  it('checks the name by the host connected to: localhost verifies, another name is refused', async () => {
    const ca = certs?.ca.cert ?? ''
    harness.url = `amqps://guest:guest@localhost:${port}`
    await harness.open({ tls: { ca } })
    const error = await refusal({ ca, servername: 'rabbit.example.test' })
    expect(error.message).toMatch(
      /TLS: the broker's certificate was refused, since it is not for the name connected to .*ERR_TLS_CERT_ALTNAME_INVALID.*rabbit\.example\.test/,
    )
  })

  it('refuses a broker certificate from a CA it does not trust, even with NODE_TLS_REJECT_UNAUTHORIZED=0', async () => {
    const wrongCa = await refusal({ ca: certs?.otherCa.cert ?? '' })
    expect(wrongCa.message).toMatch(
      /TLS: the broker's certificate was refused, since its chain ends at a CA that is not trusted \(tls\.ca\) \(SELF_SIGNED_CERT_IN_CHAIN/,
    )
    expect(wrongCa.message).not.toContain('guest:guest')
    const before = process.env['NODE_TLS_REJECT_UNAUTHORIZED']
    process.env['NODE_TLS_REJECT_UNAUTHORIZED'] = '0'
    try {
      // Without `ca`, Node's trusted CAs: the test CA is not among them.
      const noCa = await refusal({})
      expect(noCa.message).toMatch(/SELF_SIGNED_CERT_IN_CHAIN/)
    } finally {
      if (before === undefined) delete process.env['NODE_TLS_REJECT_UNAUTHORIZED']
      else process.env['NODE_TLS_REJECT_UNAUTHORIZED'] = before
    }
  })

  it('logs in with the client certificate (EXTERNAL), as the user its common name names', async () => {
    const files = certs as TlsCertificates
    harness.url = `amqps://127.0.0.1:${port}`
    await harness.open({
      connectionName: 'acemq-tls-external',
      tls: {
        ca: files.ca.cert,
        cert: files.client.cert,
        key: files.client.key,
        externalAuth: true,
      },
    })
    const ours = (await connections(node as RabbitNode)).filter((row) =>
      row.name.startsWith('acemq-tls-external'),
    )
    expect(ours).toHaveLength(2)
    for (const row of ours) {
      expect(row).toMatchObject({ ssl: true, user: 'acemq-client', auth_mechanism: 'EXTERNAL' })
    }
    // The same login without a client certificate is the broker's to refuse, and it does.
    const transport = harness.create({
      tls: { ca: files.ca.cert },
      socketOptions: { credentials: { mechanism: 'EXTERNAL', response: () => Buffer.from('') } },
    })
    await expect(transport.connect()).rejects.toThrow(
      /the broker refused the login by client certificate \(EXTERNAL, ACCESS_REFUSED\)/,
    )
  })

  // Last: the node keeps serving the expired certificate until it is stopped after this test.
  it('refuses an expired broker certificate, saying it has expired', async () => {
    const files = certs as TlsCertificates
    // The broker reads its certificate files again once its PEM cache is cleared.
    fs.writeFileSync(files.server.certFile, files.expiredServer.cert)
    fs.writeFileSync(files.server.keyFile, files.expiredServer.key)
    await node?.ctl('eval', 'ssl:clear_pem_cache().')
    const error = await refusal({ ca: files.ca.cert })
    expect(error.message).toMatch(
      /TLS: the broker's certificate was refused, since it has expired \(CERT_HAS_EXPIRED: certificate has expired\)/,
    )
  })
})
