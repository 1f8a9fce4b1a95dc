import { humanDuration } from '@acemq/core/spi'

/** An age as people read it (`2d 3h`). */
export const age = humanDuration

/** Characters that reorder or hide text: shown as their code point, never obeyed. */
const INVISIBLE =
  // eslint-disable-next-line no-control-regex -- control characters are what it matches
  /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/g

/**
 * `text` safe inside HTML text and double- or single-quoted attributes: `& < > " '` escaped,
 * and bidirectional overrides, zero-width and control characters shown as `<U+202E>` so a
 * reason or header cannot reorder or hide what the operator reads.
 */
export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;')
    .replace(
      INVISIBLE,
      (c) => `&lt;U+${c.codePointAt(0)?.toString(16).toUpperCase().padStart(4, '0') ?? ''}&gt;`,
    )
}

/** A tagged template that escapes every value unless it is {@link Html} already. */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0] ?? ''
  values.forEach((value, i) => {
    out += render(value) + (strings[i + 1] ?? '')
  })
  return new Html(out)
}

/** Markup already escaped. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text
  }
}

function render(value: unknown): string {
  if (value instanceof Html) return value.text
  if (Array.isArray(value)) return value.map(render).join('')
  if (value === undefined || value === null || value === false) return ''
  return escapeHtml(String(value))
}

/** A path segment or query value for a link built by the console: percent-encoded. */
export function q(value: string): string {
  return encodeURIComponent(value)
}
