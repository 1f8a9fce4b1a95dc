import net from 'node:net'
import { describe, expect, it } from 'vitest'
import { ConfigurationError } from '@acemq/core'
import { discoverDeadLetterQueues, managementEndpoint } from '../src/index.js'

describe('the management API that finds dead-letter queues', () => {
  it('is the AMQP host on port 15672 with the AMQP login when not given', () => {
    expect(managementEndpoint('amqp://ops:s3%40cret@rabbit.internal:5672/orders')).toEqual({
      url: 'http://rabbit.internal:15672',
      user: 'ops',
      password: 's3@cret',
      derived: true,
    })
  })

  it('is HTTPS on port 15671 for an amqps URL, and guest/guest for a URL without a login', () => {
    expect(managementEndpoint('amqps://rabbit:5671')).toEqual({
      url: 'https://rabbit:15671',
      user: 'guest',
      password: 'guest',
      derived: true,
    })
  })

  it('takes --management-url as given, with its own login when it has one, and keeps it out of the printable URL', () => {
    expect(
      managementEndpoint('amqp://app:a@rabbit', 'https://admin:p%2Fw@mgmt.example:8443/rabbit/'),
    ).toEqual({
      url: 'https://mgmt.example:8443/rabbit',
      user: 'admin',
      password: 'p/w',
      derived: false,
    })
    expect(managementEndpoint('amqp://app:a@rabbit', 'http://mgmt:15672')).toMatchObject({
      user: 'app',
      password: 'a',
    })
  })

  it('refuses a --management-url that is no http(s) URL, naming the option and the value without its password', () => {
    expect(() => managementEndpoint('amqp://rabbit', 'amqp://u:secret@rabbit')).toThrow(
      new ConfigurationError(
        "--management-url must be an http:// or https:// URL; got 'amqp://u:***@rabbit'",
      ),
    )
    expect(() => managementEndpoint('amqp://rabbit', 'not a url')).toThrow(ConfigurationError)
  })

  it('fails with how to name the queues instead when the derived API does not answer', async () => {
    const closed = await new Promise<number>((resolve) => {
      const server = net.createServer()
      server.listen(0, '127.0.0.1', () => {
        const { port } = server.address() as net.AddressInfo
        server.close(() => resolve(port))
      })
    })
    const endpoint = {
      url: `http://127.0.0.1:${closed}`,
      user: 'ops',
      password: 'never-shown',
      derived: true,
    }
    const failure = discoverDeadLetterQueues(endpoint, '/')
    await expect(failure).rejects.toThrow(
      `the management API at http://127.0.0.1:${closed} did not answer: ECONNREFUSED (is the rabbitmq_management plugin enabled? give its address with --management-url, or name the queues with --queues)`,
    )
    await expect(failure).rejects.not.toThrow(/never-shown/)
  })
})
