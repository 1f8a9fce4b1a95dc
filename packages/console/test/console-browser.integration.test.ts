import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import axe from 'axe-core'
import { chromium, type Browser, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AceMq, ConsumerOptions, DeadLetterArchive, RetryPolicy, Topology } from '@acemq/core'
import type { ArchiveCollector } from '@acemq/core/spi'
import { SqliteArchiveStore } from '@acemq/store-sqlite'
import { eventually, requireRabbit, uniqueName } from '@acemq/testing'
import { connect } from '@acemq/transport-amqp'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import { serveConsole, type ConsoleServer } from '../src/index.js'
import { HOSTILE } from './support/fixture.js'

const hasRabbit = await requireRabbit()

/** Debian's chromium: never a browser download. */
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium'
const TOKEN = 'browser-test-token-0123456789'
// The README's screenshots are made by this test: written over the committed ones when
// ACEMQ_UPDATE_SCREENSHOTS=1, else into a folder of the run's own, so a test run leaves the
// working tree as it found it.
const SCREENSHOTS =
  process.env['ACEMQ_UPDATE_SCREENSHOTS'] === '1'
    ? path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../docs')
    : mkdtempSync(path.join(tmpdir(), 'acemq-console-screenshots-'))

describe.runIf(hasRabbit)('the console in a real browser, on the real broker', () => {
  let vhost: BrokerVhost
  let mq: AceMq
  let dir: string
  let store: SqliteArchiveStore
  let collector: ArchiveCollector
  let archive: DeadLetterArchive
  let server: ConsoleServer
  let browser: Browser
  let page: Page
  const queue = uniqueName('console')
  const handled: string[] = []
  let failing = true
  const dialogs: string[] = []

  beforeAll(async () => {
    vhost = await BrokerVhost.create('acemq-console')
    mq = await connect(vhost.url, { connectionName: 'acemq-console-test' })
    await mq.applyTopology(Topology.define().queueWithRetry(queue, RetryPolicy.none()))
    await mq.consume(queue, ConsumerOptions.defaults().withRetry(RetryPolicy.none()), (message) => {
      const order = message.payload as { id: string; error: string }
      if (failing) throw new Error(order.error)
      handled.push(order.id)
    })
    const publisher = mq.publisher<{ id: string; error: string }>('', queue)
    const orders = [
      { id: 'order-1', error: 'Timeout talking to payments' },
      { id: 'order-2', error: HOSTILE.script },
      { id: 'order-3', error: HOSTILE.rtl },
      { id: HOSTILE.img, error: HOSTILE.link },
    ]
    for (const order of orders) await publisher.send(order, { id: order.id })
    await eventually(
      async () => (await vhost.counts(`${queue}.dlq`))?.ready === orders.length,
      15_000,
      'every order dead-lettered on the broker',
    )
    failing = false
    dir = mkdtempSync(path.join(tmpdir(), 'acemq-console-browser-'))
    store = new SqliteArchiveStore(path.join(dir, 'archive.db'))
    archive = new DeadLetterArchive({ transport: mq.transport, store })
    collector = await archive.collect([`${queue}.dlq`])
    await eventually(
      () => collector.archived === orders.length,
      15_000,
      'every dead letter archived',
    )
    server = await serveConsole({
      archive,
      token: TOKEN,
      health: () => mq.health(),
      queues: async () =>
        Promise.all(
          [`${queue}.dlq`, `${queue}.parked`].map(async (name) => ({
            queue: name,
            messages: (await vhost.counts(name))?.ready,
          })),
        ),
    })
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] })
    page = await browser.newPage({ viewport: { width: 1200, height: 800 } })
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message())
      void dialog.dismiss()
    })
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    await server?.close()
    await collector?.close()
    await mq?.close()
    store?.close()
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
    await vhost?.delete()
  })

  /** Presses Tab until the focused element is the one `matches` says, as a keyboard user would. */
  async function tabTo(
    description: string,
    matches: (focused: { name: string | null; text: string }) => boolean,
  ): Promise<void> {
    for (let i = 0; i < 60; i++) {
      await page.keyboard.press('Tab')
      const focused = page.locator(':focus')
      if ((await focused.count()) === 0) continue
      const name = await focused.getAttribute('name')
      const text = ((await focused.textContent()) ?? '').replace(/\s+/g, ' ').trim()
      if (matches({ name, text })) return
    }
    throw new Error(`Tab never reached ${description}`)
  }

  async function noScriptRan(): Promise<void> {
    expect(await page.evaluate('window.__xss')).toBeUndefined()
    expect(dialogs).toEqual([])
  }

  it('signs in, filters, opens a dead letter and replays it with the keyboard alone; the consumer gets it once and the audit log says so', async () => {
    await page.goto(`${server.url}/messages`)
    expect(new URL(page.url()).pathname).toBe('/login')
    await tabTo('the name field', (f) => f.name === 'actor')
    await page.keyboard.type('ana')
    await page.keyboard.press('Tab')
    await page.keyboard.type(TOKEN)
    await page.keyboard.press('Enter')
    await page.waitForURL(/\/messages$/)
    expect(await page.locator('tbody tr').count()).toBe(4)

    await tabTo('the reason filter', (f) => f.name === 'reason')
    await page.keyboard.type('timeout')
    await page.keyboard.press('Enter')
    await page.waitForURL(/reason=timeout/)
    expect(await page.locator('tbody tr').count()).toBe(1)
    await page.screenshot({ path: path.join(SCREENSHOTS, 'dead-letters.png') })

    await tabTo('the message link', (f) => f.text === 'order-1')
    await page.keyboard.press('Enter')
    await page.waitForURL(/\/messages\/[^/]+$/)
    expect(await page.locator('dd').first().textContent()).toBe('order-1')
    expect(await page.locator('pre').textContent()).toContain(
      '"error": "Timeout talking to payments"',
    )
    await page.screenshot({ path: path.join(SCREENSHOTS, 'detail.png'), fullPage: true })

    await tabTo('Replay…', (f) => f.text === 'Replay…')
    await page.keyboard.press('Enter')
    await page.waitForURL(/\/confirm\?/)
    await tabTo('the confirm button', (f) => f.text === 'Replay 1')
    await page.keyboard.press('Enter')
    await page.waitForURL(/done=replayed/)
    expect(await page.locator('[role=status]').textContent()).toBe('replayed 1 message(s)')

    await eventually(() => handled.length === 1, 10_000, 'the consumer got the replayed order')
    // Once: nothing else arrives, from the replay or from the dead-letter queue.
    await new Promise((resolve) => setTimeout(resolve, 500))
    expect(handled).toEqual(['order-1'])

    await tabTo('the audit log link', (f) => f.text === 'Audit log')
    await page.keyboard.press('Enter')
    await page.waitForURL(/\/audit$/)
    const row = await page.locator('tbody tr').first().locator('td').allTextContents()
    expect(row.slice(1, 4)).toEqual(['ana', 'replay', '1'])
    expect(row[4]).toBe(`to ${queue}`)
    await page.screenshot({ path: path.join(SCREENSHOTS, 'audit.png') })
    await noScriptRan()
  })

  it('runs none of the hostile text it shows: script tags, an onerror attribute, a javascript: link, an RTL override', async () => {
    await page.goto(`${server.url}/messages`)
    await noScriptRan()
    for (const id of (await archive.find({})).messages.map((m) => m.id)) {
      await page.goto(`${server.url}/messages/${encodeURIComponent(id)}`)
      await noScriptRan()
      expect(await page.locator('img').count()).toBe(0)
      expect(await page.locator('a[href^="javascript:" i]').count()).toBe(0)
    }
    const rtl = (await archive.find({ reason: 'invoice' })).messages[0]
    await page.goto(`${server.url}/messages/${rtl?.id}`)
    expect(await page.locator('dd').nth(3).textContent()).toContain('invoice<U+202E>gnp.exe')
    await page.goto(`${server.url}/`)
    await page.screenshot({ path: path.join(SCREENSHOTS, 'queues.png') })
  })

  it('has no serious or critical accessibility violation on any page (axe-core)', async () => {
    // axe is injected as a script, which the console's own policy forbids: this context bypasses it.
    const context = await browser.newContext({
      bypassCSP: true,
      storageState: await page.context().storageState(),
    })
    const audit = await context.newPage()
    const id = (await archive.find({})).messages[0]?.id as string
    const paths = [
      '/',
      '/messages',
      `/messages/${id}`,
      `/messages/${id}/edit`,
      `/confirm?action=discard&ids=${id}`,
      '/audit',
      '/health',
    ]
    const found: string[] = []
    try {
      for (const p of paths) {
        await audit.goto(`${server.url}${p}`)
        await audit.addScriptTag({ content: axe.source })
        const { violations, passes } = (await audit.evaluate(
          'axe.run().then((r) => ({ passes: r.passes.length, violations: r.violations.map((v) => ({ id: v.id, impact: v.impact })) }))',
        )) as { passes: number; violations: { id: string; impact: string | null }[] }
        // axe ran its rules on the page (a page it could not read would pass nothing).
        expect(passes).toBeGreaterThan(5)
        for (const v of violations) {
          if (v.impact === 'serious' || v.impact === 'critical')
            found.push(`${p}: ${v.id} (${v.impact})`)
        }
      }
    } finally {
      await context.close()
    }
    expect(found).toEqual([])
  })
})
