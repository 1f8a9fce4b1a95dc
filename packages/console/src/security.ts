import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { ConfigurationError } from '@acemq/core'

/** Who is asking, as an `authorize` hook answers. */
export interface ConsoleUser {
  /** The operator's name, as the audit log keeps it. */
  readonly actor: string
}

/** Decides who a request is from; undefined refuses it (403). */
export type AuthorizeHook = (
  request: IncomingMessage,
) => ConsoleUser | undefined | Promise<ConsoleUser | undefined>

/** How the console tells who is asking. Exactly one is required. */
export interface ConsoleAuthOptions {
  /** Your own check (a session, a proxy's header). */
  readonly authorize?: AuthorizeHook
  /**
   * A shared secret: a browser signs in once with it (and a name for the audit log), a
   * script sends `Authorization: Bearer <token>`. At least 16 characters.
   */
  readonly token?: string
  /**
   * No sign-in at all, for a console on this machine only: every request must come from a
   * loopback address, and the actor is `local`. Never the default.
   */
  readonly insecureLoopbackOnly?: boolean
}

/** The cookie a token sign-in sets. */
export const SESSION_COOKIE = 'acemq_console'

/** The strict policy every answer carries: no script at all, styles from the console only. */
export const CONTENT_SECURITY_POLICY =
  "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

/** Headers every answer carries. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
})

/** Signs sessions and CSRF tokens with a key of this process (or derived from the token). */
export class ConsoleGuard {
  readonly #options: ConsoleAuthOptions
  readonly #key: Buffer

  constructor(options: ConsoleAuthOptions) {
    const modes = [
      options.authorize !== undefined,
      options.token !== undefined,
      options.insecureLoopbackOnly === true,
    ].filter(Boolean).length
    if (modes === 0) {
      throw new ConfigurationError(
        'the console refuses to start without authorize, token, or insecureLoopbackOnly: true (loopback only)',
      )
    }
    if (modes > 1) {
      throw new ConfigurationError(
        'give one of authorize, token and insecureLoopbackOnly, not several',
      )
    }
    if (options.authorize !== undefined && typeof options.authorize !== 'function') {
      throw new ConfigurationError(`authorize must be a function; got ${typeof options.authorize}`)
    }
    if (
      options.token !== undefined &&
      (typeof options.token !== 'string' || options.token.length < 16)
    ) {
      throw new ConfigurationError('token must be text of at least 16 characters')
    }
    this.#options = options
    this.#key = randomBytes(32)
  }

  /** Whether a sign-in page is offered (token mode). */
  get usesToken(): boolean {
    return this.#options.token !== undefined
  }

  /** Who sent `request`, or undefined when nobody it may be. */
  async userOf(request: IncomingMessage): Promise<ConsoleUser | undefined> {
    const options = this.#options
    if (options.insecureLoopbackOnly === true) {
      return isLoopback(request.socket.remoteAddress) ? { actor: 'local' } : undefined
    }
    if (options.authorize !== undefined) {
      const user = await options.authorize(request)
      if (user === undefined) return undefined
      if (typeof user.actor !== 'string' || user.actor.trim() === '') {
        throw new ConfigurationError(
          `authorize must answer an actor's name; got ${JSON.stringify(user.actor)}`,
        )
      }
      return user
    }
    const token = options.token as string
    const bearer = /^Bearer (.+)$/.exec(request.headers.authorization ?? '')?.[1]
    if (bearer !== undefined) {
      return equal(bearer, token) ? { actor: 'token' } : undefined
    }
    const cookie = cookieOf(request, SESSION_COOKIE)
    if (cookie === undefined) return undefined
    const [name, mac] = cookie.split('.')
    if (name === undefined || mac === undefined) return undefined
    const actor = Buffer.from(name, 'base64url').toString('utf8')
    return equal(mac, this.#sign(`session:${actor}`)) ? { actor } : undefined
  }

  /** The cookie value for `actor` after a sign-in with `token`, or undefined when it is wrong. */
  session(token: string, actor: string): string | undefined {
    if (!this.usesToken || !equal(token, this.#options.token as string)) return undefined
    return `${Buffer.from(actor).toString('base64url')}.${this.#sign(`session:${actor}`)}`
  }

  /** The CSRF token every form of `actor`'s pages carries. */
  csrf(actor: string): string {
    return this.#sign(`csrf:${actor}`)
  }

  /** Whether a POST carries `actor`'s CSRF token and, when the browser says, comes from here. */
  checkPost(request: IncomingMessage, actor: string, token: string | undefined): boolean {
    const site = request.headers['sec-fetch-site']
    if (site !== undefined && site !== 'same-origin' && site !== 'none') return false
    const origin = request.headers.origin
    if (origin !== undefined && origin !== 'null') {
      try {
        if (new URL(origin).host !== request.headers.host) return false
      } catch {
        return false
      }
    }
    return token !== undefined && equal(token, this.csrf(actor))
  }

  #sign(text: string): string {
    return createHmac('sha256', this.#key).update(text).digest('base64url')
  }
}

/** Whether `address` is this machine's (127.0.0.0/8, ::1, or IPv4 mapped into IPv6). */
export function isLoopback(address: string | undefined): boolean {
  if (address === undefined) return false
  return address === '::1' || /^(?:::ffff:)?127\./.test(address)
}

function equal(a: string, b: string): boolean {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

function cookieOf(request: IncomingMessage, name: string): string | undefined {
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const [key, ...value] = part.trim().split('=')
    if (key === name) return value.join('=')
  }
  return undefined
}
