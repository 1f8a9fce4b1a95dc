import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DeadLetterArchive, InMemoryTransport } from '@acemq/core'
import { SqliteArchiveStore } from '@acemq/store-sqlite'
import { eventually } from '@acemq/testing'

/** Text an attacker would put in a dead letter: none of it may run or mislead. */
export const HOSTILE = {
  script: '<script>window.__xss = 1</script>',
  img: '"><img src=x onerror="window.__xss=2">',
  link: 'javascript:window.__xss=3',
  rtl: 'invoice\u202Egnp.exe',
}

/** An archive in a temporary SQLite file on an in-memory broker, with dead letters in it. */
export async function archiveWithHostileLetters(): Promise<{
  readonly archive: DeadLetterArchive
  readonly transport: InMemoryTransport
  readonly ids: string[]
  close(): Promise<void>
}> {
  const dir = mkdtempSync(join(tmpdir(), 'acemq-console-'))
  const store = new SqliteArchiveStore(join(dir, 'archive.db'))
  const transport = new InMemoryTransport()
  await transport.connect()
  const queue = (name: string) =>
    ({ kind: 'queue', name, type: 'classic', durable: true, arguments: {} }) as const
  await transport.declare([queue('orders.placed'), queue('orders.placed.dlq')])
  const archive = new DeadLetterArchive({ transport, store })
  const letters = [
    { id: 'plain-1', error: 'Timeout talking to payments', body: '{"order":1}' },
    { id: HOSTILE.img, error: HOSTILE.script, body: JSON.stringify({ html: HOSTILE.script }) },
    { id: 'rtl-1', error: HOSTILE.rtl, body: '{"order":3}' },
    { id: 'big-1', error: 'too big', body: 'x'.repeat(10 * 1024 * 1024) },
  ]
  for (const letter of letters) {
    await transport.publish({
      exchange: '',
      routingKey: 'orders.placed.dlq',
      body: new TextEncoder().encode(letter.body),
      headers: {
        'x-acemq-id': letter.id,
        'x-acemq-type': 'order.placed',
        'x-acemq-attempt': 3,
        'x-acemq-error': letter.error,
        'x-link': HOSTILE.link,
        'x-img': HOSTILE.img,
      },
      properties: { contentType: 'application/json' },
      persistent: true,
      mandatory: true,
    })
  }
  const collector = await archive.collect(['orders.placed.dlq'])
  await eventually(() => collector.archived === letters.length, 10_000, 'the letters archived')
  await collector.close()
  const { messages } = await archive.find({})
  return {
    archive,
    transport,
    ids: messages.map((m) => m.id),
    async close() {
      await transport.close()
      store.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
