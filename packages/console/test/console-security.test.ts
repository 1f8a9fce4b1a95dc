import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  CONTENT_SECURITY_POLICY,
  createConsoleHandler,
  serveConsole,
  type ConsoleServer,
} from '../src/index.js'
import { archiveWithHostileLetters } from './support/fixture.js'

const TOKEN = 'a-token-of-24-characters'

describe('the console, safe by default', () => {
  let fixture: Awaited<ReturnType<typeof archiveWithHostileLetters>>
  let server: ConsoleServer
  let readOnly: ConsoleServer
  const bearer = { authorization: `Bearer ${TOKEN}` }

  beforeAll(async () => {
    fixture = await archiveWithHostileLetters()
    server = await serveConsole({ archive: fixture.archive, token: TOKEN })
    readOnly = await serveConsole({ archive: fixture.archive, token: TOKEN, readOnly: true })
  })

  afterAll(async () => {
    await server?.close()
    await readOnly?.close()
    await fixture?.close()
  })

  const get = (path: string, headers: Record<string, string> = bearer, on = server) =>
    fetch(`${on.url}${path}`, { headers, redirect: 'manual' })

  it('refuses to start without an authorize hook, a token or the explicit loopback-only flag', async () => {
    expect(() => createConsoleHandler({ archive: fixture.archive })).toThrow(
      'the console refuses to start without authorize, token, or insecureLoopbackOnly: true (loopback only)',
    )
    expect(() => createConsoleHandler({ archive: fixture.archive, token: 'short' })).toThrow(
      'token must be text of at least 16 characters',
    )
    await expect(
      serveConsole({ archive: fixture.archive, insecureLoopbackOnly: true, host: '0.0.0.0' }),
    ).rejects.toThrow("insecureLoopbackOnly needs a loopback host; got host '0.0.0.0'")
  })

  it('sends a browser without a session to sign in, and refuses a wrong token', async () => {
    const anonymous = await get('/messages', {})
    expect(anonymous.status).toBe(303)
    expect(anonymous.headers.get('location')).toBe('/login')
    expect(
      (await get('/messages', { authorization: 'Bearer wrong-token-of-24-chars!' })).status,
    ).toBe(303)
    const wrong = await fetch(`${server.url}/login`, {
      method: 'POST',
      body: new URLSearchParams({ actor: 'ana', token: 'not-the-token-at-all' }),
      redirect: 'manual',
    })
    expect(wrong.status).toBe(401)
    expect(wrong.headers.get('set-cookie')).toBeNull()
  })

  it('signs a browser in with an HttpOnly, SameSite=Strict cookie, Secure behind HTTPS, that opens the pages', async () => {
    const signIn = (headers: Record<string, string> = {}) =>
      fetch(`${server.url}/login`, {
        method: 'POST',
        headers,
        body: new URLSearchParams({ actor: 'ana', token: TOKEN }),
        redirect: 'manual',
      })
    const plain = await signIn()
    expect(plain.status).toBe(303)
    const cookie = plain.headers.get('set-cookie') ?? ''
    expect(cookie).toMatch(/^acemq_console=[^;]+; HttpOnly; SameSite=Strict; Path=\/$/)
    const page = await get('/messages', { cookie: cookie.split(';')[0] as string })
    expect(page.status).toBe(200)
    expect(await page.text()).toContain('Signed in as ana')
    const proxied = await signIn({ 'x-forwarded-proto': 'https' })
    expect(proxied.headers.get('set-cookie')).toMatch(/; Secure$/)
  })

  it('answers every page with a strict Content-Security-Policy that allows no script', async () => {
    for (const path of ['/', '/messages', `/messages/${fixture.ids[0]}`, '/audit', '/login']) {
      const response = await get(path)
      expect(response.headers.get('content-security-policy')).toBe(CONTENT_SECURITY_POLICY)
      expect(response.headers.get('x-frame-options')).toBe('DENY')
    }
    expect(CONTENT_SECURITY_POLICY).toContain("default-src 'none'")
    expect(CONTENT_SECURITY_POLICY).not.toMatch(/script-src|unsafe/)
  })

  it('renders every payload, header and reason escaped: no tag, attribute or link of theirs reaches the page', async () => {
    const pages = [await (await get('/messages')).text()]
    for (const id of fixture.ids)
      pages.push(await (await get(`/messages/${encodeURIComponent(id)}`)).text())
    for (const page of pages) {
      expect(page).not.toContain('<script')
      expect(page).not.toContain('<img')
      expect(page).not.toMatch(/href="javascript:/i)
      expect(page).not.toContain('\u202E')
    }
    const all = pages.join('\n')
    expect(all).toContain('&lt;script&gt;window.__xss = 1&lt;/script&gt;')
    expect(all).toContain('&quot;&gt;&lt;img src=x onerror=&quot;window.__xss=2&quot;&gt;')
    expect(all).toContain('invoice&lt;U+202E&gt;gnp.exe')
  })

  it('shows a 10 MB payload truncated, with a download of all of it', async () => {
    const big = (await fixture.archive.find({ id: 'big-1' })).messages[0]
    const page = await (await get(`/messages/${big?.id}`)).text()
    expect(page).toContain('Showing the first 65536 bytes.')
    expect(page.length).toBeLessThan(200_000)
    const download = await get(`/messages/${big?.id}/body`)
    expect(download.headers.get('content-disposition')).toMatch(/^attachment;/)
    expect((await download.arrayBuffer()).byteLength).toBe(10 * 1024 * 1024)
  })

  it('refuses a POST without the CSRF token, or from another origin, and changes nothing', async () => {
    const id = fixture.ids[0] as string
    const post = (fields: Record<string, string>, headers: Record<string, string> = {}) =>
      fetch(`${server.url}/actions/discard`, {
        method: 'POST',
        headers: { ...bearer, ...headers },
        body: new URLSearchParams(fields),
        redirect: 'manual',
      })
    expect((await post({ ids: id })).status).toBe(403)
    expect((await post({ ids: id, _csrf: 'forged' })).status).toBe(403)
    const page = await (await get(`/confirm?action=discard&ids=${id}`)).text()
    const csrf = /name="_csrf" value="([^"]+)"/.exec(page)?.[1] as string
    expect((await post({ ids: id, _csrf: csrf }, { origin: 'https://evil.example' })).status).toBe(
      403,
    )
    expect((await fixture.archive.get(id))?.status).toBe('archived')
    expect((await get(`/actions/discard?ids=${id}`)).status).toBe(404)
    expect((await fixture.archive.get(id))?.status).toBe('archived')
  })

  it('in read-only mode shows no action and refuses every POST', async () => {
    const page = await (await get(`/messages/${fixture.ids[0]}`, bearer, readOnly)).text()
    expect(page).not.toMatch(/Replay…|Discard…|method="post"/)
    const refused = await fetch(`${readOnly.url}/actions/replay`, {
      method: 'POST',
      headers: bearer,
      body: new URLSearchParams({ ids: fixture.ids[0] as string }),
    })
    expect(refused.status).toBe(403)
    expect((await fixture.archive.get(fixture.ids[0] as string))?.status).toBe('archived')
  })
})
