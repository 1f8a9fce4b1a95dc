// The routes a pipeline must follow whoever wrote them (docs/design.md §15): pipelines sharing
// one idempotency store, routes that revisit a step, steps renamed or removed between deploys,
// and the family's layout (the pipeline's exchange). Run by pipelineScenarios on every transport.
import { describe, expect, it } from 'vitest'
import { InMemoryIdempotencyStore, Topology, type AceMq } from '@acemq/core'
import { ENVELOPE_HEADERS, ROUTE_HEADERS, headerString } from '@acemq/core/spi'
import { eventually as until, sleep } from '../helpers/eventually.js'
import { uniqueName } from '../services/services.js'
import {
  type BrokerProbe,
  type ScenarioConnection,
  type ScenarioTarget,
} from './engine-scenarios.js'
import { eachScenario } from './scenario-hooks.js'

interface Order {
  readonly id: string
}

/** A run's first message as another AceMQ library writes it: its own route, at `position`. */
function foreignHop(
  id: string,
  route: string,
  position: number,
): [Uint8Array, { contentType: string; messageId: string; headers: Record<string, unknown> }] {
  return [
    Buffer.from(JSON.stringify({ id })),
    {
      contentType: 'application/json',
      messageId: id,
      headers: {
        'x-acemq-id': id,
        [ROUTE_HEADERS.route]: route,
        [ROUTE_HEADERS.position]: position,
        [ROUTE_HEADERS.runId]: id,
      },
    },
  ]
}

/** The pipeline scenarios about routes, on the transport `label` names. */
export function pipelineRouteScenarios(label: string, target: ScenarioTarget): void {
  describe(`pipeline routes on ${label}`, () => {
    let connection: ScenarioConnection
    let mq: AceMq
    let probe: BrokerProbe
    const queues: string[] = []
    eachScenario(target, queues, (opened) => {
      connection = opened
      ;({ mq, probe } = opened)
    })

    /** A new pipeline name; its step queues are deleted after the scenario. */
    function pipelineName(prefix: string, ...steps: string[]): string {
      const name = uniqueName(prefix)
      for (const step of steps) queues.push(`${name}.${step}`)
      return name
    }

    it("runs each pipeline's step of the same name for the same run id when two pipelines share one idempotency store", async () => {
      const store = InMemoryIdempotencyStore.forOneDay()
      const ran: string[] = []
      const build = (name: string) =>
        mq
          .pipeline<Order>(name)
          .step('validate', async (order) => {
            ran.push(`${name} validate ${order.id}`)
            return order
          })
          .step('book', async (order) => {
            ran.push(`${name} book ${order.id}`)
            return order
          })
          .idempotent(store)
          .build()
      const checkout = await build(pipelineName('checkout', 'validate', 'book'))
      const refund = await build(pipelineName('refund', 'validate', 'book'))
      await checkout.send({ id: 'o-1' }, { id: 'o-1' })
      await until(() => checkout.completed === 1, 10_000, 'the checkout run completed')
      await refund.send({ id: 'o-1' }, { id: 'o-1' })
      await until(() => refund.completed === 1, 10_000, 'the refund run completed')
      expect(ran.sort()).toEqual(
        [
          `${checkout.name} validate o-1`,
          `${checkout.name} book o-1`,
          `${refund.name} validate o-1`,
          `${refund.name} book o-1`,
        ].sort(),
      )
      expect(await probe.count(`${refund.name}.validate`)).toBe(0)
    })

    for (const idempotent of [false, true]) {
      it(`follows a route that revisits a step (a,b,a,c) by its position, once each, ${idempotent ? 'with' : 'without'} an idempotency store`, async () => {
        const name = pipelineName('revisit', 'a', 'b', 'c')
        const ran: string[] = []
        const step = (label: string) => async (order: Order) => {
          ran.push(label)
          return order
        }
        let builder = mq
          .pipeline<Order>(name)
          .step('a', step('a'))
          .step('b', step('b'))
          .step('c', step('c'))
        if (idempotent) builder = builder.idempotent(InMemoryIdempotencyStore.forOneDay())
        const pipeline = await builder.build()
        await probe.sendRaw(`${name}.a`, ...foreignHop('run-revisit', 'a,b,a,c', 0))
        await until(() => pipeline.completed === 1, 5_000, 'the run completed')
        await sleep(200)
        expect(ran).toEqual(['a', 'b', 'a', 'c'])
        expect([pipeline.completed, pipeline.endedEarly]).toEqual([1, 0])
        for (const queue of pipeline.queues) expect(await probe.count(queue)).toBe(0)
      })
    }

    it("declares the pipeline's durable direct exchange with each step queue bound by its step name, so a hop another library publishes there is taken up", async () => {
      const name = pipelineName('family', 'reserve', 'charge', 'ship')
      const ran: string[] = []
      const pipeline = await mq
        .pipeline<Order>(name)
        .step('reserve', async (order) => order)
        .step('charge', async (order, { runId }) => {
          ran.push(`charge ${runId}`)
          return order
        })
        .step('ship', async (order, { runId }) => {
          ran.push(`ship ${runId}`)
          return order
        })
        .build()
      // As the Java, Ruby and Python libraries hand on: the pipeline's exchange, the step's name.
      const [body, properties] = foreignHop('run-family', 'reserve,charge,ship', 1)
      await connection.transport.publish({
        exchange: name,
        routingKey: 'charge',
        body,
        headers: properties.headers,
        properties: { contentType: properties.contentType, messageId: properties.messageId },
        persistent: true,
        mandatory: true,
      })
      await until(() => pipeline.completed === 1, 5_000, 'the run completed')
      expect(ran).toEqual(['charge run-family', 'ship run-family'])
    })

    it("publishes each hop to the pipeline's exchange with the next step's name as routing key", async () => {
      const name = pipelineName('family-hop', 'reserve', 'charge')
      const tap = `${name}.tap`
      queues.push(tap)
      const pipeline = await mq
        .pipeline<Order>(name)
        .step('reserve', async (order) => order)
        .step('charge', async (order) => order)
        .build({ consume: ['reserve'] })
      // A queue of its own bound like the step's: it sees what the exchange routes to 'charge'.
      await mq.applyTopology(
        Topology.define().queue(tap, { type: 'classic' }).bind(tap, name, 'charge'),
      )
      await pipeline.send({ id: 'o-tap' }, { id: 'run-tap' })
      // One publish routed to two queues: each queue takes it in its own time (a quorum queue's
      // count lags a classic one's), so wait for both rather than reading one after the other.
      await until(async () => (await probe.count(tap)) === 1, 5_000, 'the hop on the tap')
      await until(
        async () => (await probe.count(`${name}.charge`)) === 1,
        5_000,
        "the hop on the step's queue",
      )
    })

    it('parks, with the reason, each run whose next step this version no longer has and whose queue is gone, and new runs go on', async () => {
      const name = pipelineName('renamed', 'a', 'bill', 'c')
      queues.push(`${name}.charge`)
      const pipeline = await mq
        .pipeline<Order>(name)
        .step('a', async (order) => order)
        .step('bill', async (order) => order)
        .step('c', async (order) => order)
        .build()
      // 25 runs sent by the previous version, whose second step was 'charge'.
      for (let n = 0; n < 25; n++) {
        await probe.sendRaw(`${name}.a`, ...foreignHop(`old-${n}`, 'a,charge,c', 0))
      }
      for (let n = 0; n < 5; n++) await pipeline.send({ id: `new-${n}` })
      await until(() => pipeline.completed === 5, 10_000, 'the 5 new runs completed')
      await until(
        async () => (await probe.count(`${name}.a.parked`)) === 25,
        10_000,
        'the 25 old runs parked',
      )
      const parked = await probe.get(`${name}.a.parked`)
      expect(headerString(parked?.headers[ENVELOPE_HEADERS.error])).toBe(
        `the route's next step 'charge' is no step of pipeline '${name}' (a, bill, c), and its queue '${name}.charge' does not exist: a step renamed or removed since the run was sent`,
      )
      expect(await probe.count(`${name}.a`)).toBe(0)
    })

    it("hands a run on to a step this version no longer has when the step's queue is still there, and reports the runs waiting on it in health", async () => {
      const name = pipelineName('retired', 'a', 'bill', 'c', 'charge')
      // The previous version declared its step 'charge' (and, as the first version did, no
      // exchange binding); no process serves it any more.
      await mq.applyTopology(Topology.define().queueWithDeadLetter(`${name}.charge`))
      await mq
        .pipeline<Order>(name)
        .step('a', async (order) => order)
        .step('bill', async (order) => order)
        .step('c', async (order) => order)
        .build()
      const healthOf = async () =>
        (await mq.health()).reports.find((report) => report.name === `pipeline:${name}`)
      expect((await healthOf())?.status).toBe('UP')
      await probe.sendRaw(`${name}.a`, ...foreignHop('old-run', 'a,charge,c', 0))
      await until(
        async () => (await probe.count(`${name}.charge`)) === 1,
        10_000,
        'the hop on the old step queue',
      )
      expect(await probe.count(`${name}.a.parked`)).toBe(0)
      const report = await healthOf()
      expect(report?.status).toBe('DEGRADED')
      expect(report?.details).toMatchObject({ unserved: `${name}.charge=1` })
    })

    it('reports in health, from the start, the runs left on the queue of a step an earlier version had', async () => {
      const name = pipelineName('former', 'a', 'c', 'charge')
      await mq.applyTopology(Topology.define().queueWithDeadLetter(`${name}.charge`))
      for (const id of ['left-1', 'left-2']) {
        await probe.sendRaw(`${name}.charge`, ...foreignHop(id, 'a,charge,c', 1))
      }
      await mq
        .pipeline<Order>(name)
        .step('a', async (order) => order)
        .step('c', async (order) => order)
        .build({ formerSteps: ['charge'] })
      const report = (await mq.health()).reports.find((r) => r.name === `pipeline:${name}`)
      expect(report).toEqual({
        name: `pipeline:${name}`,
        status: 'DEGRADED',
        details: { steps: 'a,c', unserved: `${name}.charge=2` },
      })
    })

    it('takes a message without a route (an outbox record, say) as a run entering at the step whose queue it is on, and counts it entered once', async () => {
      const name = pipelineName('entry', 'reserve', 'charge', 'ship')
      const ran: string[] = []
      const pipeline = await mq
        .pipeline<Order>(name)
        .step('reserve', async (order) => {
          ran.push(`reserve ${order.id}`)
          return order
        })
        .step('charge', async (order, { runId }) => {
          ran.push(`charge ${order.id} ${runId}`)
          return order
        })
        .step('ship', async (order, { runId }) => {
          ran.push(`ship ${order.id} ${runId}`)
          return order
        })
        .idempotent(InMemoryIdempotencyStore.forOneDay())
        .build()
      // As a relay publishes a record: the pipeline's exchange, the step's name, no route.
      const plain = (id: string) => ({
        exchange: name,
        routingKey: 'charge',
        body: Buffer.from(JSON.stringify({ id })),
        headers: { 'x-acemq-id': id },
        properties: { contentType: 'application/json', messageId: id },
        persistent: true,
        mandatory: true,
      })
      await connection.transport.publish(plain('rec-1'))
      await until(() => pipeline.completed === 1, 5_000, 'the run completed')
      // The same record published twice (a relay that lost its mark) is one run.
      await connection.transport.publish(plain('rec-1'))
      await until(async () => (await probe.count(`${name}.charge`)) === 0, 5_000, 'the copy acked')
      await sleep(100)
      expect(ran).toEqual(['charge rec-1 rec-1', 'ship rec-1 rec-1'])
      expect([pipeline.entered, pipeline.completed, pipeline.endedEarly]).toEqual([1, 1, 0])
    })

    it('refuses to build a pipeline whose name is an exchange of another type, and says so', async () => {
      const name = pipelineName('taken', 'a')
      await mq.applyTopology(Topology.define().exchange(name, 'topic'))
      await expect(
        mq
          .pipeline<Order>(name)
          .step('a', async (order) => order)
          .build(),
      ).rejects.toThrow(/PRECONDITION_FAILED/)
    })
  })
}
