import {
  decodeWireJson,
  type ArchiveAuditEntry,
  type ArchiveFilter,
  type ArchivedMessage,
} from '@acemq/core/spi'
import { Html, age, html, q } from './html.js'

/** How much of a payload a page shows; the rest is a download. */
export const PAYLOAD_SHOWN_BYTES = 64 * 1024

/** A dead-letter queue as the queues page lists it. */
export interface ConsoleQueue {
  readonly queue: string
  readonly messages?: number | undefined
  readonly consumers?: number | undefined
  readonly oldestAgeMs?: number | undefined
}

/** What every page is drawn with. */
export interface PageContext {
  readonly base: string
  readonly actor: string
  readonly csrf: string
  readonly readOnly: boolean
  readonly hasHealth: boolean
  readonly now: number
}

/** The frame of every page: its title, the navigation, the main content. */
export function layout(ctx: PageContext | undefined, title: string, body: Html): string {
  const base = ctx?.base ?? ''
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${title} · AceMQ console</title>
        <link rel="stylesheet" href="${base}/assets/console.css" />
      </head>
      <body>
        <header>
          <strong>AceMQ console</strong>
          ${
            ctx === undefined
              ? ''
              : html`<nav aria-label="Main">
                    <a href="${base}/">Queues</a> · <a href="${base}/messages">Dead letters</a> ·
                    <a href="${base}/audit">Audit log</a
                    >${ctx.hasHealth ? html` · <a href="${base}/health">Health</a>` : ''}
                  </nav>
                  <span>Signed in as ${ctx.actor}${ctx.readOnly ? ' (read-only)' : ''}</span>`
          }
        </header>
        <main id="main">
          <h1>${title}</h1>
          ${body}
        </main>
      </body>
    </html> `.text
}

export function queuesPage(ctx: PageContext, queues: readonly ConsoleQueue[] | undefined): string {
  const body =
    queues === undefined
      ? html`<p class="note">
          No queue discovery is configured: the archive's dead letters are under
          <a href="${ctx.base}/messages">Dead letters</a>.
        </p>`
      : queues.length === 0
        ? html`<p>No dead-letter or parked queue found.</p>`
        : table(
            'Dead-letter and parked queues',
            ['Queue', 'Messages', 'Consumers', 'Oldest'],
            queues.map(
              (row) =>
                html`<tr>
                  <td><a href="${ctx.base}/messages?queue=${q(row.queue)}">${row.queue}</a></td>
                  <td class="num">${row.messages ?? '-'}</td>
                  <td class="num">${row.consumers ?? '-'}</td>
                  <td>${row.oldestAgeMs === undefined ? '-' : age(row.oldestAgeMs)}</td>
                </tr>`,
            ),
          )
  return layout(ctx, 'Queues', body)
}

export function listPage(
  ctx: PageContext,
  filter: ArchiveFilter,
  messages: readonly ArchivedMessage[],
  next: string | undefined,
  notice: string | undefined,
): string {
  const field = (name: keyof ArchiveFilter, label: string): Html =>
    html`<label>${label}<input name="${name}" value="${String(filter[name] ?? '')}" /></label>`
  const status = filter.status ?? ''
  const nextQuery = new URLSearchParams()
  for (const [key, value] of Object.entries(filter)) {
    if (value !== undefined && key !== 'after' && key !== 'limit') nextQuery.set(key, String(value))
  }
  if (next !== undefined) nextQuery.set('after', next)
  const rows = messages.map(
    (m) =>
      html`<tr>
        ${ctx.readOnly ? '' : html`<td><input type="checkbox" name="ids" value="${m.id}" id="pick-${m.id}" aria-label="Select ${m.messageId}" /></td>`}
        <td><a href="${ctx.base}/messages/${q(m.id)}">${m.messageId}</a></td>
        <td>${m.queue}</td>
        <td>${m.messageType}</td>
        <td>${truncate(m.reason, 120)}</td>
        <td class="num">${m.attempt}</td>
        <td>${age(ctx.now - m.archivedAt)} ago</td>
        <td>${m.status}</td>
      </tr>`,
  )
  const body = html`${notice === undefined ? '' : html`<p class="ok" role="status">${notice}</p>`}
    <form
      class="filters"
      method="get"
      action="${ctx.base}/messages"
      role="search"
      aria-label="Filter dead letters"
    >
      ${field('queue', 'Queue')}${field('messageType', 'Message type')}${field('reason', 'Reason contains')}${field('id', 'Id')}
      <label
        >Status<select name="status">
          ${['', 'archived', 'replayed', 'discarded'].map((s) => html`<option value="${s}" ${s === status ? html` selected` : ''}>${s === '' ? 'any' : s}</option>`)}
        </select></label
      >
      <button type="submit">Filter</button>
    </form>
    ${
      messages.length === 0
        ? html`<p>No dead letter matches.</p>`
        : html`<form method="get" action="${ctx.base}/confirm">
            ${table(
              'Dead letters, newest first',
              [
                ...(ctx.readOnly ? [] : ['Pick']),
                'Id',
                'Queue',
                'Type',
                'Reason',
                'Attempt',
                'Archived',
                'Status',
              ],
              rows,
            )}
            ${ctx.readOnly ? '' : html`<button type="submit" name="action" value="replay">Replay selected…</button> <button type="submit" name="action" value="discard" class="danger">Discard selected…</button>`}
          </form>`
    }
    ${next === undefined ? '' : html`<p><a href="${ctx.base}/messages?${nextQuery.toString()}">Next page</a></p>`}`
  return layout(ctx, 'Dead letters', body)
}

export function detailPage(ctx: PageContext, m: ArchivedMessage): string {
  let headers: Record<string, unknown> = {}
  let properties: Record<string, unknown> = {}
  try {
    headers = decodeWireJson(m.headers) as Record<string, unknown>
    properties = decodeWireJson(m.properties) as Record<string, unknown>
  } catch {
    // Shown as stored below.
  }
  const contentType = typeof properties['contentType'] === 'string' ? properties['contentType'] : ''
  const shown = payloadText(m.body, contentType)
  const body = html`<dl>
      <dt>Envelope id</dt>
      <dd>${m.messageId}</dd>
      <dt>Queue</dt>
      <dd>${m.queue}</dd>
      <dt>Type</dt>
      <dd>${m.messageType}</dd>
      <dt>Reason</dt>
      <dd>${m.reason === '' ? '(none given)' : m.reason}</dd>
      <dt>Attempt</dt>
      <dd>${m.attempt}</dd>
      <dt>First seen</dt>
      <dd>
        ${m.firstSeen === undefined ? 'unknown' : html`${new Date(m.firstSeen).toISOString()} (${age(ctx.now - m.firstSeen)} ago)`}
      </dd>
      <dt>Archived</dt>
      <dd>${new Date(m.archivedAt).toISOString()}</dd>
      <dt>Correlation id</dt>
      <dd>${m.correlationId}</dd>
      <dt>Trace</dt>
      <dd>${m.traceparent ?? '(none)'}</dd>
      <dt>Status</dt>
      <dd>
        ${m.status}${m.statusBy === undefined ? '' : html` by ${m.statusBy}`}${m.replayedTo === undefined ? '' : html` to ${m.replayedTo}`}
      </dd>
    </dl>
    ${ctx.readOnly || m.status !== 'archived' ? '' : html`<p><a href="${ctx.base}/confirm?action=replay&amp;ids=${q(m.id)}">Replay…</a> · <a href="${ctx.base}/messages/${q(m.id)}/edit">Edit and replay…</a> · <a href="${ctx.base}/confirm?action=discard&amp;ids=${q(m.id)}">Discard…</a></p>`}
    <h2>Payload (${m.body.byteLength} bytes${contentType === '' ? '' : html`, ${contentType}`})</h2>
    ${shown.truncated ? html`<p class="note">Showing the first ${PAYLOAD_SHOWN_BYTES} bytes. <a href="${ctx.base}/messages/${q(m.id)}/body" download>Download the whole payload</a></p>` : html`<p><a href="${ctx.base}/messages/${q(m.id)}/body" download>Download</a></p>`}
    <pre>${shown.text}</pre>
    ${valueTable('Headers', headers)} ${valueTable('Properties', properties)}`
  return layout(ctx, `Dead letter ${truncate(m.messageId, 60)}`, body)
}

export function confirmPage(
  ctx: PageContext,
  action: 'replay' | 'discard',
  messages: readonly ArchivedMessage[],
): string {
  const verb = action === 'replay' ? 'Replay' : 'Discard'
  const body = html`<form method="post" action="${ctx.base}/actions/${action}">
    <input type="hidden" name="_csrf" value="${ctx.csrf}" />
    <p>${verb} ${messages.length} message(s)?</p>
    <ul>
      ${messages.map((m) => html`<li><input type="hidden" name="ids" value="${m.id}" />${m.messageId} (${m.queue}, ${m.status})</li>`)}
    </ul>
    ${action === 'replay' ? html`<label>Into queue (empty: each message's source queue) <input name="into" /></label>` : html`<p class="note">A discarded message stays as a tombstone until the retention purges it.</p>`}
    <p>
      <button type="submit" ${action === 'discard' ? html` class="danger"` : ''}>
        ${verb} ${messages.length}
      </button>
      <a href="${ctx.base}/messages">Cancel</a>
    </p>
  </form>`
  return layout(ctx, `${verb}?`, body)
}

export function editPage(ctx: PageContext, m: ArchivedMessage): string {
  const body = html`<form method="post" action="${ctx.base}/messages/${q(m.id)}/edit">
    <input type="hidden" name="_csrf" value="${ctx.csrf}" />
    <p>
      The new payload is sent to ${m.queue.replace(/\.(dlq|parked)$/, '')} under the same envelope
      id (${m.messageId}), so an idempotent consumer handles it once, unless a new id is asked for.
    </p>
    <label for="payload">Payload</label>
    <textarea id="payload" name="payload">
${new TextDecoder().decode(m.body.subarray(0, PAYLOAD_SHOWN_BYTES))}</textarea>
    <p>
      <label><input type="checkbox" name="newId" value="yes" /> Send under a new envelope id</label>
    </p>
    <p>
      <button type="submit">Replay the edited message</button>
      <a href="${ctx.base}/messages/${q(m.id)}">Cancel</a>
    </p>
  </form>`
  return layout(ctx, `Edit and replay ${truncate(m.messageId, 60)}`, body)
}

export function auditPage(ctx: PageContext, entries: readonly ArchiveAuditEntry[]): string {
  const body =
    entries.length === 0
      ? html`<p>No operator action yet.</p>`
      : table(
          'Operator actions, newest first',
          ['When', 'Who', 'What', 'How many', 'Detail'],
          entries.map(
            (e) =>
              html`<tr>
                <td>${new Date(e.at).toISOString()}</td>
                <td>${e.actor}</td>
                <td>${e.action}</td>
                <td class="num">${e.count}</td>
                <td>${truncate(e.detail, 200)}</td>
              </tr>`,
          ),
        )
  return layout(ctx, 'Audit log', body)
}

export function healthPage(ctx: PageContext, report: unknown): string {
  return layout(ctx, 'Connection health', html`<pre>${JSON.stringify(report, jsonValue, 2)}</pre>`)
}

export function signInPage(base: string, failed: boolean): string {
  return layout(
    undefined,
    'Sign in',
    html`${failed ? html`<p class="note" role="alert">That token was not accepted.</p>` : ''}
      <form method="post" action="${base}/login">
        <p>
          <label
            >Your name (for the audit log) <input name="actor" required autocomplete="username"
          /></label>
        </p>
        <p>
          <label
            >Token <input name="token" type="password" required autocomplete="current-password"
          /></label>
        </p>
        <p><button type="submit">Sign in</button></p>
      </form>`,
  )
}

function payloadText(body: Uint8Array, contentType: string): { text: string; truncated: boolean } {
  const truncated = body.byteLength > PAYLOAD_SHOWN_BYTES
  const text = new TextDecoder().decode(truncated ? body.subarray(0, PAYLOAD_SHOWN_BYTES) : body)
  if (!truncated && /json/i.test(contentType)) {
    try {
      return { text: JSON.stringify(JSON.parse(text), null, 2), truncated }
    } catch {
      // Not JSON after all: shown as it is.
    }
  }
  return { text, truncated }
}

/** A heading and a name / value table of headers or properties. */
function valueTable(title: string, values: Record<string, unknown>): Html {
  return html`<h2>${title}</h2>
    ${table(
      undefined,
      ['Name', 'Value'],
      Object.entries(values).map(
        ([k, v]) =>
          html`<tr>
            <td>${k}</td>
            <td>${display(v)}</td>
          </tr>`,
      ),
    )}`
}

/** A table: its caption (if any), a heading for each column, and its rows. */
function table(caption: string | undefined, columns: readonly string[], rows: unknown): Html {
  return html`<table>
    ${
      caption === undefined
        ? ''
        : html`<caption>
            ${caption}
          </caption>`
    }
    <thead>
      <tr>
        ${columns.map((column) => html`<th scope="col">${column}</th>`)}
      </tr>
    </thead>
    <tbody>
      ${rows}
    </tbody>
  </table>`
}

function display(value: unknown): string {
  if (value instanceof Uint8Array) return `bytes: ${new TextDecoder().decode(value)}`
  if (typeof value === 'string') return value
  return JSON.stringify(value, jsonValue) ?? String(value)
}

function jsonValue(_key: string, value: unknown): unknown {
  if (typeof value === 'bigint') return value.toString()
  if (value instanceof Uint8Array) return new TextDecoder().decode(value)
  return value
}

function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text
}
