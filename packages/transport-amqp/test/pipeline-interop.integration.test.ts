// A pipeline among the other AceMQ libraries: the route headers on the wire as the Java and
// .NET libraries write them, and messages written by them (with raw amqplib) taken up.
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { AceMq } from '@acemq/core'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { AMQP_URL, eventually, requireRabbit, uniqueName } from '@acemq/testing'
import { AmqpTransport } from '../src/index.js'
import { RecordingProxy, fieldTag } from './support/broker.js'

const hasRabbit = await requireRabbit()

function int32(n: number): Buffer {
  const bytes = Buffer.alloc(4)
  bytes.writeInt32BE(n)
  return bytes
}

/** An AMQP long string: 32-bit length, then the bytes. */
function longString(text: string): Buffer {
  return Buffer.concat([int32(Buffer.byteLength(text)), Buffer.from(text)])
}

/** Deletes `exchange` (a pipeline's), if it is there. */
async function deleteExchange(admin: AmqpAdmin, exchange: string): Promise<void> {
  const channel = await admin.connection.createChannel()
  channel.on('error', () => undefined)
  await channel.deleteExchange(exchange).catch(() => undefined)
  await channel.close().catch(() => undefined)
}

describe.runIf(hasRabbit)("a pipeline among the family's libraries", () => {
  let admin: AmqpAdmin
  let name: string

  beforeEach(async () => {
    admin = await AmqpAdmin.open()
    name = uniqueName('pipeline-interop')
  })

  afterEach(async () => {
    for (const step of ['reserve', 'charge', 'ship']) {
      const queue = `${name}.${step}`
      await admin.deleteQueues(queue, `${queue}.dlq`, `${queue}.parked`)
    }
    await deleteExchange(admin, name)
    await admin.close()
  })

  it('writes the route as the Java and .NET libraries do: step names as a string, the position a signed 32-bit int, the run id a string', async () => {
    const proxy = await RecordingProxy.start()
    const mq = await AceMq.connect(new AmqpTransport(proxy.urlFor(AMQP_URL)))
    try {
      const checkout = await mq
        .pipeline<{ readonly sku: string }>(name)
        .step('reserve', async (order) => order)
        .step('charge', async (order) => order)
        .step('ship', async (order) => order)
        .build({ consume: ['reserve'] })
      await checkout.send({ sku: 'a-1' }, { id: 'run-wire' })
      await eventually(async () => (await admin.count(`${name}.charge`)) === 1, 10_000, 'the hop')
      const sent = Buffer.concat(proxy.sent())
      const route = longString('reserve,charge,ship')
      // The send (position 0) and the hop to charge (position 1).
      for (const position of [0, 1]) {
        expect(
          sent.includes(Buffer.concat([fieldTag('x-acemq-route-position', 'I'), int32(position)])),
          `position ${position} as 'I'`,
        ).toBe(true)
      }
      expect(sent.includes(Buffer.concat([fieldTag('x-acemq-route', 'S'), route]))).toBe(true)
      expect(
        sent.includes(Buffer.concat([fieldTag('x-acemq-route-id', 'S'), longString('run-wire')])),
      ).toBe(true)
    } finally {
      await mq.close({ drainTimeout: 0 })
      await proxy.close()
    }
  })

  it('takes up a run written by another library with its route as bytes, a 64-bit position and step queue names, at the step its queue names', async () => {
    await using mq = await AceMq.connect(new AmqpTransport(AMQP_URL))
    const seen: string[] = []
    const checkout = await mq
      .pipeline<{ readonly sku: string }>(name)
      .step('reserve', async (order) => order)
      .step('charge', async (order, { runId, message }) => {
        seen.push(`charge ${runId} ${message.envelope.id} attempt ${message.envelope.attempt}`)
        return order
      })
      .step('ship', async (order, { runId }) => {
        seen.push(`ship ${runId}`)
        return order
      })
      .build()
    await admin.sendRaw(`${name}.charge`, Buffer.from(JSON.stringify({ sku: 'py-1' })), {
      contentType: 'application/json',
      headers: {
        'x-acemq-id': 'py-msg-1',
        'x-acemq-attempt': { '!': 'long', value: 3 },
        'x-acemq-route': Buffer.from(`${name}.reserve,${name}.charge,${name}.ship`),
        'x-acemq-route-position': { '!': 'long', value: 1 },
        'x-acemq-route-id': Buffer.from('py-run-1'),
      },
      persistent: true,
    })
    await eventually(() => checkout.completed === 1, 10_000, 'the foreign run completed')
    expect(seen).toEqual(['charge py-run-1 py-msg-1 attempt 3', 'ship py-run-1'])
  })

  it('moves a run along its own route, whatever position it carries: the queue it arrived on says which step it is at', async () => {
    await using mq = await AceMq.connect(new AmqpTransport(AMQP_URL))
    const seen: string[] = []
    const checkout = await mq
      .pipeline<{ readonly sku: string }>(name)
      .step('reserve', async (order) => {
        seen.push('reserve')
        return order
      })
      .step('charge', async (order) => {
        seen.push('charge')
        return order
      })
      .step('ship', async (order) => {
        seen.push('ship')
        return order
      })
      .build()
    // Replayed by hand onto reserve, still carrying the position of the step it failed at.
    await admin.sendRaw(`${name}.reserve`, Buffer.from(JSON.stringify({ sku: 'r-1' })), {
      contentType: 'application/json',
      headers: {
        'x-acemq-id': 'replayed-1',
        'x-acemq-route': 'reserve,charge,ship',
        'x-acemq-route-position': 2,
        'x-acemq-route-id': 'run-r',
      },
      persistent: true,
    })
    await eventually(() => checkout.completed === 1, 10_000, 'the run completed')
    expect(seen).toEqual(['reserve', 'charge', 'ship'])
  })

  it("declares the pipeline's exchange as the Java, Ruby and Python libraries do: durable and direct, so their declarations of it agree", async () => {
    await using mq = await AceMq.connect(new AmqpTransport(AMQP_URL))
    await mq
      .pipeline<{ readonly sku: string }>(name)
      .step('reserve', async (order) => order)
      .step('charge', async (order) => order)
      .build({ consume: [] })
    const channel = await admin.connection.createChannel()
    channel.on('error', () => undefined)
    try {
      await channel.checkExchange(name)
      // Another library's declaration: refused (PRECONDITION_FAILED) if the two disagreed.
      await channel.assertExchange(name, 'direct', { durable: true, autoDelete: false })
    } finally {
      await channel.close().catch(() => undefined)
    }
  })
})
