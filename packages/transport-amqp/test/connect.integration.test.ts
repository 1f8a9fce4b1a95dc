import { describe, expect, it } from 'vitest'
import { AceMq, Topology, readEnvelope } from '@acemq/core'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { AMQP_URL, requireRabbit, uniqueName } from '../../../test-support/services.js'
import { connect } from '../src/index.js'

const hasRabbit = await requireRabbit()

describe.runIf(hasRabbit)('connect()', () => {
  it('returns an AceMq on RabbitMQ, passing the connection options through', async () => {
    const queue = uniqueName('connect')
    const mq = await connect(AMQP_URL, {
      connectionName: 'acemq-connect-test',
      origin: 'orders@test-host',
    })
    const admin = await AmqpAdmin.open()
    try {
      expect(mq).toBeInstanceOf(AceMq)
      expect(mq.transport.kind).toBe('amqp')
      expect(mq.transport.description).not.toContain(':guest@')
      await mq.applyTopology(Topology.define().queue(queue))
      await mq.publisher('', queue).send({ ok: true })
      const got = await admin.get(queue)
      expect(readEnvelope(got?.headers, { routingKey: queue }).envelope.origin).toBe(
        'orders@test-host',
      )
    } finally {
      await mq.close()
      await admin.deleteQueues(queue)
      await admin.close()
    }
  })

  it('fails with an error that never shows the password', async () => {
    const error = await connect('amqp://guest:not-the-password@127.0.0.1:5672').catch(
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(Error)
    expect(String((error as Error).message)).not.toContain('not-the-password')
  })
})
