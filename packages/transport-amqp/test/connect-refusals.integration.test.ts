import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { rabbitmqctl } from '../../../test-support/broker-faults.js'
import { AMQP_URL, requireRabbit } from '@acemq/testing'
import { connect } from '../src/index.js'

const hasRabbit = await requireRabbit()

/** `AMQP_URL` with another virtual host and, if given, another password. */
function urlWith(vhost: string, password?: string): string {
  const url = new URL(AMQP_URL)
  url.pathname = `/${encodeURIComponent(vhost)}`
  if (password !== undefined) url.password = password
  return url.toString()
}

/** What connect() rejects with, as an Error and the text of it and its causes. */
async function refusal(url: string): Promise<{ message: string; everything: string }> {
  const error = await connect(url, { recovery: false }).then(
    async (mq) => {
      await mq.close()
      throw new Error('connect() succeeded')
    },
    (e: unknown) => e as Error & { code?: string },
  )
  const parts: string[] = []
  for (let e: unknown = error; e instanceof Error; e = e.cause) parts.push(e.message, e.stack ?? '')
  return { message: error.message, everything: parts.join('\n') }
}

describe.runIf(hasRabbit)('connect() refused by the broker says why in words', () => {
  const user = new URL(AMQP_URL).username || 'guest'
  const password = decodeURIComponent(new URL(AMQP_URL).password || 'guest')
  const closed = `acemq-closed-${Math.random().toString(36).slice(2, 10)}`

  beforeAll(async () => {
    // A virtual host that exists, but that the test's user has no permissions on.
    await rabbitmqctl('add_vhost', closed)
  })

  afterAll(async () => {
    await rabbitmqctl('delete_vhost', closed)
  })

  it('an unknown virtual host: it does not exist (or the user may not use it), password hidden', async () => {
    const vhost = `no-such-vhost-${Math.random().toString(36).slice(2, 10)}`
    const { message, everything } = await refusal(urlWith(vhost))
    expect(message).toContain(`virtual host '${vhost}'`)
    expect(message).toMatch(/does not exist/)
    expect(message).not.toMatch(/Expected ConnectionOpenOk/)
    expect(everything).not.toContain(`:${password}@`)
  })

  it('a virtual host the user has no access to: the same words, naming the user', async () => {
    const { message } = await refusal(urlWith(closed))
    expect(message).toContain(`virtual host '${closed}'`)
    // The user name is always shown, so the hint can be pasted: with guest/guest it is the
    // password too, which is then hidden in URLs only.
    expect(message).toContain(`user '${user}'`)
    expect(message).toContain(`set_permissions -p '${closed}' '${user}'`)
    expect(message).not.toContain(`:${password}@`)
    expect(message).toMatch(/no access/)
  })

  it('a wrong password: the login was refused, and the password is nowhere', async () => {
    const { message, everything } = await refusal(urlWith('/', 'not-the-password-42'))
    expect(message).toMatch(/refused the login of user/)
    expect(everything).not.toContain('not-the-password-42')
  })
})
