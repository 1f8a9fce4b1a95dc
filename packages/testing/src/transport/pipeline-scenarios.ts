// Pipeline scenarios shared by both transports (docs/design.md §15): one set of cases run on
// the in-memory transport (packages/core/test/pipeline/) and on RabbitMQ
// (packages/transport-amqp/test/pipeline.integration.test.ts).
import { describe, expect, it } from 'vitest'
import {
  FatalError,
  InMemoryIdempotencyStore,
  RetryPolicy,
  type AceMq,
  type Envelope,
} from '@acemq/core'
import { ENVELOPE_HEADERS, ROUTE_HEADERS, headerInteger, headerString } from '@acemq/core/spi'
import { eventually as until } from '../helpers/eventually.js'
import { uniqueName } from '../services/services.js'
import { type BrokerProbe, type ScenarioTarget } from './engine-scenarios.js'
import { eachScenario } from './scenario-hooks.js'
import { pipelineRouteScenarios } from './pipeline-route-scenarios.js'

interface Order {
  readonly id: string
  readonly total: number
  readonly reserved?: boolean
  readonly charged?: boolean
}

/**
 * Pipelines (docs/design.md §15) on every transport: a run through its steps, the envelope and
 * the family's route headers on each hop, early ends, foreign routes, dead-letters, parking,
 * deleted step queues and idempotent steps; then the routes of {@link pipelineRouteScenarios}.
 * Each scenario uses a pipeline of its own.
 */
export function pipelineScenarios(label: string, target: ScenarioTarget): void {
  describe(`pipelines on ${label}`, () => {
    let mq: AceMq
    let probe: BrokerProbe
    let name: string
    const queues: string[] = []
    const steps = ['reserve', 'charge', 'ship'] as const

    eachScenario(
      target,
      queues,
      (connection) => {
        ;({ mq, probe } = connection)
        name = uniqueName('pipeline')
        for (const step of steps) queues.push(`${name}.${step}`, `${name}.${step}.retry.20ms`)
      },
      { options: { origin: 'shop@test' } },
    )

    it('carries a run through every step in order and counts it entered and completed', async () => {
      const seen: string[] = []
      const checkout = await mq
        .pipeline<Order>(name)
        .step('reserve', async (order) => {
          seen.push(`reserve ${order.id}`)
          return { ...order, reserved: true }
        })
        .step('charge', async (order) => {
          seen.push(`charge ${order.id} reserved=${order.reserved}`)
          return { ...order, charged: true }
        })
        .step('ship', async (order) => {
          seen.push(`ship ${order.id} charged=${order.charged}`)
          return order
        })
        .build()
      expect(checkout.queueFor('charge')).toBe(`${name}.charge`)
      expect(checkout.queues).toEqual([`${name}.reserve`, `${name}.charge`, `${name}.ship`])
      const runId = await checkout.send({ id: 'o-1', total: 10 }, { id: 'run-o-1' })
      expect(runId).toBe('run-o-1')
      await until(() => checkout.completed === 1, 10_000, 'the run completed')
      expect(seen).toEqual(['reserve o-1', 'charge o-1 reserved=true', 'ship o-1 charged=true'])
      expect([checkout.entered, checkout.completed, checkout.endedEarly]).toEqual([1, 1, 0])
      for (const queue of checkout.queues) expect(await probe.count(queue)).toBe(0)
    })

    it('keeps the run id, first-seen, origin and correlation on every hop, with causation the previous hop and the attempt restarting at 1 per step', async () => {
      const envelopes: Record<string, Envelope> = {}
      let reserveRuns = 0
      const checkout = await mq
        .pipeline<Order>(name)
        .step('reserve', async (order, { message }) => {
          reserveRuns++
          if (reserveRuns === 1) throw new Error('inventory busy')
          envelopes['reserve'] = message.envelope
          return order
        })
        .step('charge', async (order, { message }) => {
          envelopes['charge'] = message.envelope
          return order
        })
        .step('ship', async (order, { message }) => {
          envelopes['ship'] = message.envelope
          return order
        })
        .withRetry(RetryPolicy.fixed(3, '20ms'))
        .build()
      await checkout.send(
        { id: 'o-2', total: 5 },
        { id: 'run-2', correlation: 'basket-7', origin: 'web@front-1' },
      )
      await until(() => checkout.completed === 1, 10_000, 'the run completed')
      const { reserve, charge, ship } = envelopes as Record<'reserve' | 'charge' | 'ship', Envelope>
      expect(reserve.attempt).toBe(2)
      for (const hop of [charge, ship]) {
        expect(hop.id).toBe('run-2')
        expect(hop.correlation).toBe('basket-7')
        expect(hop.origin).toBe('web@front-1')
        expect(hop.firstSeen).toBe(reserve.firstSeen)
        expect(hop.causation).toBe('run-2')
        expect(hop.attempt).toBe(1)
        expect(hop.type).toBe(name)
      }
      expect(reserve.causation).toBeUndefined()
    })

    it("writes the family's route headers on each hop, the payload encoded once", async () => {
      const checkout = await mq
        .pipeline<Order>(name)
        .step('reserve', async (order) => ({ ...order, reserved: true }))
        .step('charge', async (order) => order)
        .step('ship', async (order) => order)
        .build({ consume: ['reserve'] })
      await checkout.send({ id: 'o-3', total: 1 }, { id: 'run-3' })
      await until(
        async () => (await probe.count(`${name}.charge`)) === 1,
        10_000,
        'the hop to charge',
      )
      const hop = await probe.get(`${name}.charge`)
      expect(hop).toBeDefined()
      const headers = hop?.headers ?? {}
      expect(headerString(headers[ROUTE_HEADERS.route])).toBe('reserve,charge,ship')
      expect(headerInteger(headers[ROUTE_HEADERS.position])).toBe(1)
      expect(headerString(headers[ROUTE_HEADERS.runId])).toBe('run-3')
      expect(headerString(headers[ENVELOPE_HEADERS.id])).toBe('run-3')
      expect(headerString(headers[ENVELOPE_HEADERS.causation])).toBe('run-3')
      expect(headerInteger(headers[ENVELOPE_HEADERS.attempt])).toBe(1)
      expect(hop?.contentType).toBe('application/json')
      expect(hop?.messageId).toBe('run-3')
      // Once: the JSON of the payload, not the JSON of a string of JSON.
      expect(JSON.parse(Buffer.from(hop?.body ?? new Uint8Array()).toString('utf8'))).toEqual({
        id: 'o-3',
        total: 1,
        reserved: true,
      })
    })

    it('ends a run early when a step returns null, and completes it when the last step does', async () => {
      const shipped: string[] = []
      const checkout = await mq
        .pipeline<Order>(name)
        .step('reserve', async (order) => order)
        .step('charge', async (order) => (order.total > 0 ? order : null))
        .step('ship', async (order) => {
          shipped.push(order.id)
          return null
        })
        .build()
      await checkout.send({ id: 'free', total: 0 })
      await checkout.send({ id: 'paid', total: 9 })
      await until(
        () => checkout.endedEarly === 1 && checkout.completed === 1,
        10_000,
        'both runs done',
      )
      expect(shipped).toEqual(['paid'])
    })

    it("handles a message carrying another library's route headers at the step its queue names, and moves it on", async () => {
      const runs: string[] = []
      const checkout = await mq
        .pipeline<Order>(name)
        .step('reserve', async (order) => {
          runs.push('reserve')
          return order
        })
        .step('charge', async (order, { runId }) => {
          runs.push(`charge ${runId}`)
          return { ...order, charged: true }
        })
        .step('ship', async (order, { runId, message }) => {
          runs.push(
            `ship ${runId} charged=${order.charged} causation=${message.envelope.causation}`,
          )
          return order
        })
        .build()
      // As the Java library writes a hop: step names, a 32-bit position, its own run id.
      await probe.sendRaw(`${name}.charge`, Buffer.from(JSON.stringify({ id: 'j-1', total: 3 })), {
        contentType: 'application/json',
        messageId: 'java-msg-1',
        headers: {
          [ENVELOPE_HEADERS.id]: 'java-msg-1',
          [ROUTE_HEADERS.route]: 'reserve,charge,ship',
          [ROUTE_HEADERS.position]: 1,
          [ROUTE_HEADERS.runId]: 'java-run-1',
        },
      })
      await until(() => checkout.completed === 1, 10_000, 'the foreign run completed')
      expect(runs).toEqual([
        'charge java-run-1',
        'ship java-run-1 charged=true causation=java-msg-1',
      ])
    })

    it("moves a step's message to the step's .dlq once the pipeline's retry policy gives up", async () => {
      let charges = 0
      const checkout = await mq
        .pipeline<Order>(name)
        .step('reserve', async (order) => order)
        .step('charge', async () => {
          charges++
          throw new Error('card declined')
        })
        .step('ship', async (order) => order)
        .withRetry(RetryPolicy.fixed(3, '20ms'))
        .build()
      await checkout.send({ id: 'o-4', total: 4 })
      await until(
        async () => (await probe.count(`${name}.charge.dlq`)) === 1,
        10_000,
        'the dead-lettered step',
      )
      expect(charges).toBe(3)
      const dead = await probe.get(`${name}.charge.dlq`)
      expect(headerString(dead?.headers[ENVELOPE_HEADERS.error])).toMatch(
        /^gave up after 3 attempt\(s\): card declined$/,
      )
      expect(headerString(dead?.headers[ROUTE_HEADERS.route])).toBe('reserve,charge,ship')
      expect(checkout.completed + checkout.endedEarly).toBe(0)
    })

    it('dead-letters at once a step that throws a FatalError', async () => {
      const checkout = await mq
        .pipeline<Order>(name)
        .step('reserve', async () => {
          throw new FatalError('no such product')
        })
        .step('charge', async (order) => order)
        .build()
      await checkout.send({ id: 'o-5', total: 4 })
      await until(
        async () => (await probe.count(`${name}.reserve.dlq`)) === 1,
        10_000,
        'the rejected step',
      )
      expect(await probe.count(`${name}.charge`)).toBe(0)
    })

    it('parks, with the reason, a message whose step returns a value the codec cannot encode', async () => {
      const checkout = await mq
        .pipeline<Order>(name)
        .step('reserve', async (order) => ({ ...order, big: 10n }))
        .step('charge', async (order) => order)
        .build()
      await checkout.send({ id: 'o-6', total: 4 })
      await until(
        async () => (await probe.count(`${name}.reserve.parked`)) === 1,
        10_000,
        'the parked step',
      )
      const parked = await probe.get(`${name}.reserve.parked`)
      expect(headerString(parked?.headers[ENVELOPE_HEADERS.error])).toMatch(
        new RegExp(
          `^could not encode what step 'reserve' of pipeline '${name}' returned for '${name}.charge' \\(application/json\\): .*BigInt`,
        ),
      )
      expect(await probe.count(`${name}.reserve`)).toBe(0)
      expect(await probe.count(`${name}.charge`)).toBe(0)
    })

    it('holds a hop whose step queue was deleted, declares the queue again and delivers the hop, without running the step again', async () => {
      let reserves = 0
      const checkout = await mq
        .pipeline<Order>(name)
        .step('reserve', async (order) => {
          reserves++
          return order
        })
        .step('charge', async (order) => order)
        .build({ consume: ['reserve'] })
      await probe.deleteQueue(`${name}.charge`)
      await checkout.send({ id: 'o-9', total: 2 }, { id: 'run-9' })
      await until(
        async () => (await probe.count(`${name}.charge`)) === 1,
        10_000,
        'the hop delivered',
      )
      expect(reserves).toBe(1)
      expect(await probe.count(`${name}.reserve`)).toBe(0)
      expect(await probe.count(`${name}.reserve.parked`)).toBe(0)
    })

    it('runs each idempotent step once per run id, claiming {pipeline}.{step}:{id}', async () => {
      const store = InMemoryIdempotencyStore.forOneDay()
      const runs = { reserve: 0, charge: 0, ship: 0 }
      const checkout = await mq
        .pipeline<Order>(name)
        .step('reserve', async (order) => {
          runs.reserve++
          return order
        })
        .step('charge', async (order) => {
          runs.charge++
          return order
        })
        .step('ship', async (order) => {
          runs.ship++
          return order
        })
        .idempotent(store)
        .build()
      await checkout.send({ id: 'o-7', total: 4 }, { id: 'run-7' })
      await until(() => checkout.completed === 1, 10_000, 'the first run')
      // The same run sent again (a publisher that resent after a lost confirm).
      await checkout.send({ id: 'o-7', total: 4 }, { id: 'run-7' })
      await until(
        async () => (await probe.count(`${name}.reserve`)) === 0,
        10_000,
        'the resend acked',
      )
      await new Promise((resolve) => setTimeout(resolve, 100))
      expect(runs).toEqual({ reserve: 1, charge: 1, ship: 1 })
      for (const step of steps) expect(await store.isConfirmed(`${name}.${step}:run-7`)).toBe(true)
      expect(await store.isConfirmed('reserve:run-7')).toBe(false)
      expect(await store.isConfirmed('run-7')).toBe(false)
    })

    it('puts back a step whose claim is live elsewhere, after the default delay, and runs it once the claim is released', async () => {
      const store = InMemoryIdempotencyStore.forOneDay()
      await store.claim(`${name}.charge:run-8`, 'another-process')
      const charged: number[] = []
      const checkout = await mq
        .pipeline<Order>(name)
        .step('reserve', async (order) => order)
        .step('charge', async (order) => {
          charged.push(Date.now())
          return order
        })
        .idempotent(store)
        .build()
      const sent = Date.now()
      await checkout.send({ id: 'o-8', total: 4 }, { id: 'run-8' })
      await new Promise((resolve) => setTimeout(resolve, 1_000))
      expect(charged).toEqual([])
      await store.release(`${name}.charge:run-8`, 'another-process')
      await until(() => checkout.completed === 1, 15_000, 'the run completed')
      expect(charged).toHaveLength(1)
      // Put back after the default in-progress delay (5 s), not at once.
      expect((charged[0] as number) - sent).toBeGreaterThanOrEqual(4_900)
    }, 20_000)
  })
  pipelineRouteScenarios(label, target)
}
