// The routes a pipeline must follow whoever wrote them (docs/design.md §15): pipelines sharing
// one idempotency store, routes that revisit a step, steps renamed or removed between deploys,
// and the family's layout (the pipeline's exchange). Run by pipelineScenarios on every transport.
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { InMemoryIdempotencyStore, type AceMq } from '@acemq/core'
import { eventually as until } from '../helpers/eventually.js'
import { uniqueName } from '../services/services.js'
import {
  closeScenario,
  openScenario,
  type BrokerProbe,
  type ScenarioConnection,
  type ScenarioTarget,
} from './engine-scenarios.js'

interface Order {
  readonly id: string
}

/** The pipeline scenarios about routes, on the transport `label` names. */
export function pipelineRouteScenarios(label: string, target: ScenarioTarget): void {
  describe(`pipeline routes on ${label}`, () => {
    let connection: ScenarioConnection
    let mq: AceMq
    let probe: BrokerProbe
    const queues: string[] = []

    beforeEach(async () => {
      connection = await openScenario(target)
      ;({ mq, probe } = connection)
    })

    afterEach(async () => {
      await closeScenario(connection, queues)
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
  })
}
