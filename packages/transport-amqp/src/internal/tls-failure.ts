/** Node's (OpenSSL's) codes for a broker certificate that did not verify, and what they mean. */
const CERTIFICATE_REFUSALS: Readonly<Record<string, string>> = {
  CERT_HAS_EXPIRED: 'it has expired',
  CERT_NOT_YET_VALID: 'it is not valid yet',
  ERR_TLS_CERT_ALTNAME_INVALID:
    'it is not for the name connected to (set tls.servername to the name it holds)',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'it is self-signed and not among the trusted CAs (tls.ca)',
  SELF_SIGNED_CERT_IN_CHAIN: 'its chain ends at a CA that is not trusted (tls.ca)',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'no trusted CA (tls.ca) signed it',
  UNABLE_TO_GET_ISSUER_CERT: 'no trusted CA (tls.ca) signed it',
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: 'no trusted CA (tls.ca) signed it',
  CERT_SIGNATURE_FAILURE: 'its signature does not verify',
  CERT_REVOKED: 'it has been revoked',
  CERT_UNTRUSTED: 'it is not trusted for this purpose',
  CERT_REJECTED: 'it is rejected for this purpose',
  INVALID_PURPOSE: 'it is not a server certificate',
}

/**
 * A TLS failure in words: the broker's certificate refused (and why: expired, another name,
 * an untrusted CA), or the broker refusing ours. `undefined` for any other error. The
 * connection is never made in either case: verification is never skipped.
 */
export function describeTlsFailure(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined
  const code = (error as { code?: unknown }).code
  if (typeof code !== 'string') return undefined
  const meaning = CERTIFICATE_REFUSALS[code]
  if (meaning !== undefined) {
    return `TLS: the broker's certificate was refused, since ${meaning} (${code}: ${error.message})`
  }
  if (code.startsWith('ERR_SSL_')) {
    const alert = /alert ([a-z ]+)/i.exec(error.message)?.[1]
    return `TLS: the handshake failed${alert === undefined ? '' : ` (the broker sent the alert '${alert}': it refused our certificate or settings)`} (${code}: ${error.message})`
  }
  return undefined
}
