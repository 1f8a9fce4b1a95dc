import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { AMQP_URL, requireRabbit, uniqueName } from '@acemq/testing'
import { expectLinesInOrder } from '../../test-support/expect-lines.js'
import { LOCK_WAIT_TIMEOUT, withoutBrokerFaults } from '../../test-support/broker-lock.js'
import { expectRepeatable } from '../../test-support/repeatable.js'
import { runExample } from '../../test-support/run-example.js'

const hasRabbit = await requireRabbit()

describe.runIf(hasRabbit)('the otel-console example', () => {
  const queue = uniqueName('examples.otel-console')
  let admin: AmqpAdmin
  let code: number | string
  let output: string

  beforeAll(async () => {
    admin = await AmqpAdmin.open()
    ;({ code, output } = await withoutBrokerFaults(() =>
      runExample('otel-console', { AMQP_URL, QUEUE: queue }),
    ))
  }, LOCK_WAIT_TIMEOUT + 60_000)

  afterAll(async () => {
    await admin.deleteQueues(queue, `${queue}.dlq`, `${queue}.parked`)
    await admin.close()
  })

  it('exits 0', () => {
    expect(code, output).toBe(0)
  })

  it('prints a publish span, a retried process span and an acked one', () => {
    expectLinesInOrder(output, [
      new RegExp(`^  name: '${queue} publish',$`),
      new RegExp(`^  name: '${queue} process',$`),
      /'messaging\.acemq\.attempt': 1,/,
      /'messaging\.acemq\.outcome': 'retried'/,
      /name: 'message\.retried',/,
      new RegExp(`^  name: '${queue} process',$`),
      /'messaging\.acemq\.attempt': 2,/,
      /'messaging\.acemq\.outcome': 'acked'/,
    ])
  })

  it('puts the publish and both attempts in one trace', () => {
    const traceIds = [...output.matchAll(/^ {2}traceId: '([0-9a-f]{32})',$/gm)].map((m) => m[1])
    expect(traceIds).toHaveLength(3)
    expect(new Set(traceIds).size).toBe(1)
  })

  it('prints the acemq.* metrics after the spans', () => {
    expectLinesInOrder(output, [
      /^--- the acemq\.\* metrics$/,
      /name: 'acemq\.publish\.total',/,
      /outcome: 'confirmed'/,
      /name: 'acemq\.consume\.total',/,
      /name: 'acemq\.messages\.retried\.total',/,
    ])
  })

  it('leaves no queue behind', async () => {
    expect(output).toMatch(new RegExp(`^--- removed ${queue} and its \\.dlq and \\.parked$`, 'm'))
    for (const name of [queue, `${queue}.dlq`, `${queue}.parked`]) {
      expect(await admin.count(name), name).toBeUndefined()
    }
  })

  it(
    'runs twice with the same output',
    async () => {
      await withoutBrokerFaults(() =>
        expectRepeatable(
          'otel-console',
          { AMQP_URL, QUEUE: queue },
          // The SDK's exporters print as they go: the same lines, not always in the same order.
          { queues: [queue, `${queue}.dlq`, `${queue}.parked`], anyOrder: true },
        ),
      )
    },
    LOCK_WAIT_TIMEOUT + 90_000,
  )
})
