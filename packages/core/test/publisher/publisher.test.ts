import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  AceMq,
  ClosedError,
  CodecRegistry,
  ConfigurationError,
  ConnectionBlockedError,
  InMemoryTransport,
  PublishFailedError,
  PublishingPausedError,
  Topology,
  UnroutableError,
  textCodec,
} from '../../src/index.js'
import { readEnvelope } from '../../src/spi.js'

describe('Publisher on the in-memory transport', () => {
  let transport: InMemoryTransport
  let mq: AceMq

  beforeEach(async () => {
    transport = new InMemoryTransport()
    mq = await AceMq.connect(transport, { origin: 'orders@test' })
    await mq.applyTopology(Topology.define().queue('orders'))
  })

  afterEach(async () => {
    await mq.close({ drainTimeout: 0 })
  })

  it('writes the envelope, the content type and persistent delivery', async () => {
    await mq
      .publisher('', 'orders')
      .send(
        { id: 'o-1' },
        { correlation: 'c-1', causation: 'm-0', headers: { 'x-tenant': 'acme' } },
      )
    const stored = transport.get('orders')
    expect(stored?.persistent).toBe(true)
    expect(stored?.properties.contentType).toBe('application/json')
    const { envelope, headers } = readEnvelope(stored?.headers, {
      routingKey: 'orders',
      messageId: stored?.properties.messageId,
    })
    expect(envelope).toMatchObject({
      type: 'orders',
      version: 1,
      attempt: 1,
      correlation: 'c-1',
      causation: 'm-0',
      origin: 'orders@test',
    })
    expect(stored?.properties.messageId).toBe(envelope.id)
    expect(headers).toEqual({ 'x-tenant': 'acme' })
    expect(stored?.headers['x-acemq-attempt']).toEqual({ '!': 'int', value: 1 })
    expect(stored?.headers['x-acemq-first-seen']).toMatchObject({ '!': 'long' })
  })

  it('refuses a reserved x-acemq- header before anything is sent', async () => {
    await expect(
      mq.publisher('', 'orders').send({}, { headers: { 'x-acemq-attempt': 7 } }),
    ).rejects.toThrow(/own namespace/)
    expect(() => mq.publisher('', 'orders', { headers: { 'x-acemq-id': 'x' } })).toThrow(
      ConfigurationError,
    )
    expect(transport.messageCount('orders')).toBe(0)
  })

  it('rejects with PublishingPausedError while paused, and sends again after resume', async () => {
    mq.pausePublishing()
    await expect(mq.publisher('', 'orders').send({})).rejects.toBeInstanceOf(PublishingPausedError)
    await expect(mq.publisher('', 'orders').sendAll([{}, {}])).rejects.toBeInstanceOf(
      PublishingPausedError,
    )
    expect(transport.messageCount('orders')).toBe(0)
    mq.resumePublishing()
    await mq.publisher('', 'orders').send({})
    expect(transport.messageCount('orders')).toBe(1)
  })

  it('rejects with ConnectionBlockedError while the broker blocks the connection', async () => {
    transport.block('low on memory')
    const error = await mq
      .publisher('', 'orders')
      .send({})
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ConnectionBlockedError)
    expect((error as ConnectionBlockedError).reason).toBe('low on memory')
    transport.unblock()
    await mq.publisher('', 'orders').send({})
  })

  it('rejects an unroutable publish unless told to allow it', async () => {
    await expect(mq.publisher('', 'nowhere').send({})).rejects.toBeInstanceOf(UnroutableError)
    await mq.publisher('', 'nowhere', { allowUnroutable: true }).send({})
  })

  it('reports how many of a batch were not confirmed', async () => {
    await mq.applyTopology(Topology.define().exchange('ex', 'direct').bind('orders', 'ex', 'ok'))
    const error = await mq
      .publisher('ex', 'ok')
      .sendAll([1, 2, 3])
      .then(() => undefined)
    expect(error).toBeUndefined()
    expect(transport.messageCount('orders')).toBe(3)
    const failed = await mq
      .publisher('ex', 'missing')
      .sendAll([1, 2])
      .catch((e: unknown) => e)
    expect(failed).toBeInstanceOf(PublishFailedError)
    expect((failed as Error).message).toBe('2 of 2 were not confirmed')
  })

  it('encodes with the codec the content type names', async () => {
    const text = await AceMq.connect(transport, {
      codecs: CodecRegistry.defaults().with(textCodec),
    })
    await text.publisher<string>('', 'orders', { contentType: 'text/plain' }).send('hello')
    const stored = transport.get('orders')
    expect(Buffer.from(stored?.body ?? []).toString()).toBe('hello')
    expect(stored?.properties.contentType).toBe('text/plain')
    expect(() => text.publisher('', 'orders', { contentType: 'application/x-unknown' })).toThrow(
      /no codec/,
    )
    await text.close()
  })

  it('refuses to publish after close', async () => {
    await mq.close()
    await expect(mq.publisher('', 'orders').send({})).rejects.toBeInstanceOf(ClosedError)
  })
})
