import { execFile } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'

const run = promisify(execFile)

/** A certificate and its key, as files and as PEM text. */
export interface CertificateFiles {
  readonly certFile: string
  readonly keyFile: string
  readonly cert: string
  readonly key: string
}

/** What {@link generateTlsCertificates} makes, all with P-256 keys. */
export interface TlsCertificates {
  /** The folder holding every file (readable by the `rabbitmq` user). */
  readonly dir: string
  /** The CA that signs everything below. */
  readonly ca: CertificateFiles
  /** Another CA, which signed none of them: the wrong CA to trust. */
  readonly otherCa: CertificateFiles
  /** The broker's certificate, for `localhost` and `127.0.0.1`, valid for two days. */
  readonly server: CertificateFiles
  /** The same names, but valid only from three days ago to yesterday. */
  readonly expiredServer: CertificateFiles
  /** A client certificate whose common name is `clientName`, valid for two days. */
  readonly client: CertificateFiles
  /** Removes the folder. */
  remove(): void
}

const SERVER_NAMES = 'DNS:localhost, IP:127.0.0.1'

/** `YYYYMMDDHHMMSSZ` for `openssl ca`, `days` from now. */
function asn1Time(days: number): string {
  return `${new Date(Date.now() + days * 86_400_000).toISOString().replace(/[-:T]/g, '').slice(0, 14)}Z`
}

async function openssl(cwd: string, ...args: string[]): Promise<void> {
  await run('openssl', args, { cwd, timeout: 30_000 })
}

/**
 * Generates, with the `openssl` command, a test CA, a wrong CA, a server certificate for
 * `localhost` / `127.0.0.1` (and an expired one), and a client certificate whose common name
 * is `clientName` (for RabbitMQ's `EXTERNAL` login), in a fresh folder under the system's temp
 * folder. About a second.
 *
 * @example
 * ```ts
 * const certs = await generateTlsCertificates('acemq-client')
 * try { ... certs.ca.cert ... } finally { certs.remove() }
 * ```
 */
export async function generateTlsCertificates(clientName: string): Promise<TlsCertificates> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'acemq-tls-'))
  // RabbitMQ runs as its own user and must read the broker's files.
  fs.chmodSync(dir, 0o755)
  const files = (name: string): CertificateFiles => {
    const certFile = path.join(dir, `${name}.pem`)
    const keyFile = path.join(dir, `${name}.key`)
    return {
      certFile,
      keyFile,
      get cert() {
        return fs.readFileSync(certFile, 'utf8')
      },
      get key() {
        return fs.readFileSync(keyFile, 'utf8')
      },
    }
  }
  const newKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']

  const selfSignedCa = async (name: string, cn: string): Promise<CertificateFiles> => {
    const ca = files(name)
    fs.writeFileSync(
      path.join(dir, `${name}.cnf`),
      [
        '[req]',
        'distinguished_name = dn',
        'x509_extensions = ca_ext',
        'prompt = no',
        '[dn]',
        `CN = ${cn}`,
        '[ca_ext]',
        'basicConstraints = critical, CA:TRUE',
        'keyUsage = critical, keyCertSign, cRLSign',
        'subjectKeyIdentifier = hash',
        '',
      ].join('\n'),
    )
    await openssl(
      dir,
      'req',
      '-x509',
      ...newKey,
      '-days',
      '3',
      '-config',
      `${name}.cnf`,
      '-keyout',
      ca.keyFile,
      '-out',
      ca.certFile,
    )
    return ca
  }
  const ca = await selfSignedCa('ca', 'acemq test CA')
  const otherCa = await selfSignedCa('other-ca', 'acemq wrong CA')

  fs.mkdirSync(path.join(dir, 'issued'))
  fs.writeFileSync(path.join(dir, 'index.txt'), '')
  fs.writeFileSync(path.join(dir, 'serial'), '1000\n')
  fs.writeFileSync(
    path.join(dir, 'signing.cnf'),
    [
      '[ca]',
      'default_ca = test_ca',
      '[test_ca]',
      `database = ${path.join(dir, 'index.txt')}`,
      `new_certs_dir = ${path.join(dir, 'issued')}`,
      `certificate = ${ca.certFile}`,
      `private_key = ${ca.keyFile}`,
      `serial = ${path.join(dir, 'serial')}`,
      'default_md = sha256',
      'policy = any_name',
      'unique_subject = no',
      'email_in_dn = no',
      '[any_name]',
      'commonName = supplied',
      '[server_ext]',
      'basicConstraints = CA:FALSE',
      'keyUsage = critical, digitalSignature',
      'extendedKeyUsage = serverAuth',
      `subjectAltName = ${SERVER_NAMES}`,
      'authorityKeyIdentifier = keyid',
      '[client_ext]',
      'basicConstraints = CA:FALSE',
      'keyUsage = critical, digitalSignature',
      'extendedKeyUsage = clientAuth',
      'authorityKeyIdentifier = keyid',
      '',
    ].join('\n'),
  )
  const issue = async (
    name: string,
    cn: string,
    extensions: string,
    fromDays: number,
    toDays: number,
  ): Promise<CertificateFiles> => {
    const issued = files(name)
    await openssl(
      dir,
      'req',
      '-new',
      ...newKey,
      '-subj',
      `/CN=${cn}`,
      '-keyout',
      issued.keyFile,
      '-out',
      `${name}.csr`,
    )
    await openssl(
      dir,
      'ca',
      '-batch',
      '-notext',
      '-config',
      'signing.cnf',
      '-extensions',
      extensions,
      '-startdate',
      asn1Time(fromDays),
      '-enddate',
      asn1Time(toDays),
      '-in',
      `${name}.csr`,
      '-out',
      issued.certFile,
    )
    return issued
  }
  const server = await issue('server', 'localhost', 'server_ext', -1 / 24, 2)
  const expiredServer = await issue('expired-server', 'localhost', 'server_ext', -3, -1)
  const client = await issue('client', clientName, 'client_ext', -1 / 24, 2)
  for (const file of fs.readdirSync(dir)) fs.chmodSync(path.join(dir, file), 0o755)
  return {
    dir,
    ca,
    otherCa,
    server,
    expiredServer,
    client,
    remove: () => fs.rmSync(dir, { recursive: true, force: true }),
  }
}
