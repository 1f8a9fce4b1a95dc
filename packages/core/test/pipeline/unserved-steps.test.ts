import { afterEach, beforeEach, expect, it, vi } from 'vitest'
import { InMemoryTransport, Topology } from '../../src/index.js'
import { UnservedSteps } from '../../src/pipeline/unserved-steps.js'

let transport: InMemoryTransport
let unserved: UnservedSteps

beforeEach(async () => {
  transport = new InMemoryTransport()
  await transport.connect()
  unserved = new UnservedSteps('p', ['a', 'bill'], transport)
})

afterEach(async () => {
  vi.useRealTimers()
  await transport.close()
})

it('asks the broker whether a queue exists at most once a second, however many hops go there', async () => {
  await transport.declare(Topology.define().queue('p.charge').plan())
  const asked = vi.spyOn(transport, 'queueLength')
  vi.useFakeTimers({ now: 0, toFake: ['Date'] })
  for (let n = 0; n < 10; n++) expect(await unserved.missing('charge', 'p.charge')).toBeUndefined()
  expect(asked).toHaveBeenCalledTimes(1)
  vi.setSystemTime(1_000)
  await unserved.missing('charge', 'p.charge')
  expect(asked).toHaveBeenCalledTimes(2)
})

it('says why a hop to a queue that does not exist can never be routed, naming the entry, the pipeline and its steps', async () => {
  expect(await unserved.missing('charge', 'p.charge')).toBe(
    "the route's next step 'charge' is no step of pipeline 'p' (a, bill), and its queue 'p.charge' does not exist: a step renamed or removed since the run was sent",
  )
  expect(await unserved.missing('other.queue', 'other.queue')).toBe(
    "the route's next step names the queue 'other.queue', which does not exist",
  )
})

it('reports DEGRADED while a watched queue holds messages, and forgets a queue once it is deleted', async () => {
  await transport.declare(Topology.define().queue('p.charge').plan())
  unserved.watch('p.charge')
  expect(await unserved.report()).toEqual({
    name: 'pipeline:p',
    status: 'UP',
    details: { steps: 'a,bill' },
  })
  await publishTo('p.charge')
  expect(await unserved.report()).toEqual({
    name: 'pipeline:p',
    status: 'DEGRADED',
    details: { steps: 'a,bill', unserved: 'p.charge=1' },
  })
  transport.deleteQueue('p.charge')
  expect((await unserved.report()).status).toBe('UP')
  // Declared again and holding a message: no longer watched, so no longer reported.
  await transport.declare(Topology.define().queue('p.charge').plan())
  await publishTo('p.charge')
  expect((await unserved.report()).status).toBe('UP')
})

function publishTo(queue: string): Promise<void> {
  return transport.publish({
    exchange: '',
    routingKey: queue,
    body: new Uint8Array(),
    headers: {},
    properties: {},
    persistent: true,
    mandatory: true,
  })
}
