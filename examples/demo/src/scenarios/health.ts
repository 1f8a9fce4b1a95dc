import { toHealthJson } from '@acemq/core'
import type { DemoContext, SummaryRow } from '../demo-context.js'

/**
 * What `GET /acemq-health` would serve (`@acemq/health-express`, `@acemq/health-fastify`):
 * the connection's report plus a contributor that asks the idempotency store a question.
 */
export async function health(demo: DemoContext, store: string): Promise<SummaryRow> {
  demo.section('Health')
  demo.mq.registerHealth({
    name: 'idempotency-store',
    async report() {
      await demo.store.isConfirmed('health-probe') // throws → reported DOWN with the error
      return { name: 'idempotency-store', status: 'UP', details: { store } }
    },
  })
  const json = toHealthJson(await demo.mq.health())
  console.log(JSON.stringify(json, null, 2).replace(/^/gm, '   '))

  const components = Object.entries(json.components).map(([name, c]) => `${name} ${c.status}`)
  return {
    scenario: 'health',
    queue: '',
    outcome: json.status,
    detail: `${components.join(', ')}; inFlight ${json.inFlight}`,
  }
}
