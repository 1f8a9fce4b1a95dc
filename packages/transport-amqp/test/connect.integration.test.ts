import { describe, expect, it } from 'vitest'
import { AceMq, Topology } from '@acemq/core'
import { readEnvelope } from '@acemq/core/spi'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { AMQP_URL, requireRabbit, uniqueName } from '@acemq/testing'
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

  it('takes a list of nodes, connects to one that answers and names it in health, never localhost', async () => {
    const answering = new URL(AMQP_URL)
    const refusing = new URL(AMQP_URL)
    refusing.port = '1' // nothing listens there: connection refused at once
    const mq = await connect([refusing.toString(), answering.toString()], {
      connectionName: 'acemq-connect-list-test',
      logger: { warn: () => undefined },
    })
    try {
      const health = await mq.health()
      const connection = health.reports.find((report) => report.name === 'connection')
      const transport = connection?.details['transport'] ?? ''
      expect(transport).toContain(`${answering.hostname}:${answering.port || '5672'}`)
      expect(transport).toContain('publish')
      expect(transport).toContain('consume')
      expect(transport).not.toContain('localhost')
      expect(transport).not.toContain(':guest@')
    } finally {
      await mq.close()
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
