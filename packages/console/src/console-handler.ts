import type { IncomingMessage, ServerResponse } from 'node:http'
import { ConfigurationError, type DeadLetterArchive } from '@acemq/core'
import { describeError, type ArchiveFilter } from '@acemq/core/spi'
import { CONSOLE_CSS } from './console-style.js'
import {
  auditPage,
  confirmPage,
  detailPage,
  editPage,
  healthPage,
  layout,
  listPage,
  queuesPage,
  signInPage,
  type ConsoleQueue,
  type PageContext,
} from './pages.js'
import { html } from './html.js'
import {
  ConsoleGuard,
  SECURITY_HEADERS,
  SESSION_COOKIE,
  type ConsoleAuthOptions,
} from './security.js'

/** The largest form a POST may send: an edited payload of up to 10 MB, and the rest. */
export const MAX_FORM_BYTES = 11 * 1024 * 1024

/** Options of {@link createConsoleHandler}. */
export interface ConsoleOptions extends ConsoleAuthOptions {
  /** The archive the pages read and act on. */
  readonly archive: DeadLetterArchive
  /** The dead-letter queues for the queues page (e.g. from the management API). */
  readonly queues?: () => Promise<readonly ConsoleQueue[]>
  /** The connection's health report, when the console is mounted in a service (`() => mq.health()`). */
  readonly health?: () => unknown
  /** Pages only: every action is hidden and every POST but sign-in refused (default false). */
  readonly readOnly?: boolean
  /** Where the console is mounted, for its links (Express's `req.baseUrl` wins when set). */
  readonly basePath?: string
  /** Epoch ms (default `Date.now`). */
  readonly now?: () => number
}

/** A Node request handler serving the console: `http.createServer(handler)`, or mounted. */
export type ConsoleHandler = (request: IncomingMessage, response: ServerResponse) => void

/**
 * The console as a Node request handler. Refuses to be made without a way to tell who asks
 * (`authorize`, `token`, or `insecureLoopbackOnly`); every state change is a POST carrying a
 * CSRF token; every answer carries a strict Content-Security-Policy (no script at all); every
 * payload, header and reason is escaped.
 *
 * @example
 * ```ts
 * const handler = createConsoleHandler({ archive, token: process.env.CONSOLE_TOKEN })
 * http.createServer(handler).listen(8080, '127.0.0.1')
 * ```
 */
export function createConsoleHandler(options: ConsoleOptions): ConsoleHandler {
  if (typeof options !== 'object' || options === null) {
    throw new ConfigurationError(`options must be an object; got ${String(options)}`)
  }
  if (typeof options.archive?.find !== 'function') {
    throw new ConfigurationError(
      `options.archive must be a DeadLetterArchive; got ${String(options.archive)}`,
    )
  }
  const guard = new ConsoleGuard(options)
  const now = options.now ?? Date.now
  const readOnly = options.readOnly === true
  return (request, response) => {
    serve(request, response).catch((error: unknown) => {
      if (!response.headersSent)
        send(response, 500, layout(undefined, 'Error', html`<p>${describeError(error)}</p>`))
      else response.end()
    })
  }

  async function serve(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const mounted = (request as { baseUrl?: unknown }).baseUrl
    const base = typeof mounted === 'string' ? mounted : (options.basePath ?? '').replace(/\/$/, '')
    const url = new URL(request.url ?? '/', 'http://console.invalid')
    let path = url.pathname
    if (typeof mounted !== 'string' && base !== '' && path.startsWith(base))
      path = path.slice(base.length) || '/'
    const method = request.method ?? 'GET'
    if (path === '/assets/console.css') {
      send(response, 200, CONSOLE_CSS, 'text/css; charset=utf-8')
      return
    }
    if (path === '/login' && guard.usesToken) {
      if (method === 'POST') {
        const form = await readForm(request)
        const actor = (form.get('actor') ?? '').trim()
        const cookie = actor === '' ? undefined : guard.session(form.get('token') ?? '', actor)
        if (cookie === undefined || !sameOrigin(request)) {
          send(response, 401, signInPage(base, true))
          return
        }
        // Secure whenever the browser reached it over HTTPS, directly or through a proxy.
        const secure =
          (request.socket as { encrypted?: boolean }).encrypted === true ||
          request.headers['x-forwarded-proto'] === 'https'
        response.setHeader(
          'set-cookie',
          `${SESSION_COOKIE}=${cookie}; HttpOnly; SameSite=Strict; Path=${base === '' ? '/' : base}${secure ? '; Secure' : ''}`,
        )
        redirect(response, `${base}/messages`)
        return
      }
      send(response, 200, signInPage(base, false))
      return
    }
    const user = await guard.userOf(request)
    if (user === undefined) {
      if (guard.usesToken && method === 'GET') redirect(response, `${base}/login`)
      else send(response, 403, layout(undefined, 'Forbidden', html`<p>Not allowed.</p>`))
      return
    }
    const ctx: PageContext = {
      base,
      actor: user.actor,
      csrf: guard.csrf(user.actor),
      readOnly,
      hasHealth: options.health !== undefined,
      now: now(),
    }
    if (method === 'POST') {
      if (readOnly) {
        send(
          response,
          403,
          layout(ctx, 'Read-only', html`<p class="readonly">This console is read-only.</p>`),
        )
        return
      }
      const form = await readForm(request)
      if (!guard.checkPost(request, user.actor, form.get('_csrf') ?? undefined)) {
        send(
          response,
          403,
          layout(ctx, 'Refused', html`<p>The form was not this console's (CSRF check).</p>`),
        )
        return
      }
      await act(response, ctx, path, form)
      return
    }
    if (method !== 'GET' && method !== 'HEAD') {
      send(response, 405, layout(ctx, 'Not allowed', html`<p>${method} is not served.</p>`))
      return
    }
    await page(response, ctx, path, url.searchParams)
  }

  async function page(
    response: ServerResponse,
    ctx: PageContext,
    path: string,
    query: URLSearchParams,
  ): Promise<void> {
    const archive = options.archive
    if (path === '/') {
      send(
        response,
        200,
        queuesPage(ctx, options.queues === undefined ? undefined : await options.queues()),
      )
      return
    }
    if (path === '/messages') {
      const filter = filterOf(query)
      const result = await archive.find(filter).catch((error: unknown) => error as Error)
      if (result instanceof Error) {
        send(response, 400, layout(ctx, 'Bad filter', html`<p>${result.message}</p>`))
        return
      }
      send(response, 200, listPage(ctx, filter, result.messages, result.next, noticeOf(query)))
      return
    }
    if (path === '/audit') {
      send(response, 200, auditPage(ctx, await archive.auditLog({ limit: 200 })))
      return
    }
    if (path === '/health' && options.health !== undefined) {
      send(response, 200, healthPage(ctx, await options.health()))
      return
    }
    if (path === '/confirm' && !ctx.readOnly) {
      const action = query.get('action')
      const ids = query.getAll('ids')
      if ((action !== 'replay' && action !== 'discard') || ids.length === 0) {
        redirect(response, `${ctx.base}/messages`)
        return
      }
      const found = []
      for (const id of ids) {
        const message = await archive.get(id)
        if (message !== undefined) found.push(message)
      }
      send(response, 200, confirmPage(ctx, action, found))
      return
    }
    const match = /^\/messages\/([^/]+)(\/body|\/edit)?$/.exec(path)
    const message =
      match === null ? undefined : await archive.get(decodeURIComponent(match[1] as string))
    if (match === null || message === undefined) {
      send(response, 404, layout(ctx, 'Not found', html`<p>Nothing here.</p>`))
      return
    }
    if (match[2] === '/body') {
      response.writeHead(200, {
        ...SECURITY_HEADERS,
        'content-type': 'application/octet-stream',
        'content-disposition': `attachment; filename="dead-letter-${message.id.replace(/[^\w-]/g, '_')}.bin"`,
        'content-length': String(message.body.byteLength),
      })
      response.end(Buffer.from(message.body))
      return
    }
    if (match[2] === '/edit' && !ctx.readOnly) {
      send(response, 200, editPage(ctx, message))
      return
    }
    send(response, 200, detailPage(ctx, message))
  }

  async function act(
    response: ServerResponse,
    ctx: PageContext,
    path: string,
    form: URLSearchParams,
  ): Promise<void> {
    const archive = options.archive
    const into = (form.get('into') ?? '').trim()
    try {
      if (path === '/actions/replay' || path === '/actions/discard') {
        const ids = form.getAll('ids')
        const result =
          path === '/actions/replay'
            ? await archive.replay(ids, { actor: ctx.actor, ...(into === '' ? {} : { into }) })
            : await archive.discard(ids, { actor: ctx.actor })
        const verb = path === '/actions/replay' ? 'replayed' : 'discarded'
        redirect(
          response,
          `${ctx.base}/messages?done=${verb}&n=${result.changed}&skipped=${result.skipped.length}`,
        )
        return
      }
      const match = /^\/messages\/([^/]+)\/edit$/.exec(path)
      if (match !== null) {
        const id = decodeURIComponent(match[1] as string)
        const result = await archive.editAndReplay(
          id,
          new TextEncoder().encode(form.get('payload') ?? ''),
          {
            actor: ctx.actor,
            newId: form.get('newId') === 'yes',
          },
        )
        redirect(
          response,
          `${ctx.base}/messages?done=replayed&n=${result.changed}&skipped=${result.skipped.length}`,
        )
        return
      }
    } catch (error) {
      send(
        response,
        409,
        layout(
          ctx,
          'Not done',
          html`<p class="note" role="alert">${describeError(error)}</p>
            <p><a href="${ctx.base}/messages">Back</a></p>`,
        ),
      )
      return
    }
    send(response, 404, layout(ctx, 'Not found', html`<p>Nothing here.</p>`))
  }
}

function filterOf(query: URLSearchParams): ArchiveFilter {
  const filter: Record<string, unknown> = {}
  for (const key of ['queue', 'messageType', 'reason', 'id', 'after', 'status'] as const) {
    const value = query.get(key)
    if (value !== null && value !== '') filter[key] = value
  }
  return filter as ArchiveFilter
}

/** The outcome of the action that redirected here, in the console's own words only. */
function noticeOf(query: URLSearchParams): string | undefined {
  const done = query.get('done')
  if (done !== 'replayed' && done !== 'discarded') return undefined
  const n = Number(query.get('n'))
  const skipped = Number(query.get('skipped'))
  if (!Number.isSafeInteger(n) || !Number.isSafeInteger(skipped)) return undefined
  return `${done} ${n} message(s)${skipped > 0 ? `; ${skipped} skipped (not found, or replayed or discarded already)` : ''}`
}

function sameOrigin(request: IncomingMessage): boolean {
  const origin = request.headers.origin
  if (origin === undefined || origin === 'null') return true
  try {
    return new URL(origin).host === request.headers.host
  } catch {
    return false
  }
}

async function readForm(request: IncomingMessage): Promise<URLSearchParams> {
  const parsed = (request as { body?: unknown }).body
  if (typeof parsed === 'object' && parsed !== null && !(parsed instanceof Uint8Array)) {
    // A framework read the body already (express.urlencoded()).
    const form = new URLSearchParams()
    for (const [key, value] of Object.entries(parsed)) {
      for (const item of Array.isArray(value) ? value : [value]) form.append(key, String(item))
    }
    return form
  }
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > MAX_FORM_BYTES)
      throw new ConfigurationError(`the form is over ${MAX_FORM_BYTES} bytes`)
    chunks.push(chunk)
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'))
}

function send(
  response: ServerResponse,
  status: number,
  body: string,
  type = 'text/html; charset=utf-8',
): void {
  response.writeHead(status, { ...SECURITY_HEADERS, 'content-type': type })
  response.end(body)
}

function redirect(response: ServerResponse, location: string): void {
  response.writeHead(303, { ...SECURITY_HEADERS, location })
  response.end()
}
