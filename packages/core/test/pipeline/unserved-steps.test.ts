import { afterEach, beforeEach, expect, it, vi } from 'vitest'
import { InMemoryTransport, Topology } from '../../src/index.js'
import type { Transport } from '../../src/spi.js'
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
  vi.useFakeTimers({ now: 10_000, toFake: ['Date'] })
  for (let n = 0; n < 10; n++) expect(await unserved.missing('charge', 'p.charge')).toBeUndefined()
  expect(asked).toHaveBeenCalledTimes(1)
  vi.setSystemTime(10_999)
  await unserved.missing('charge', 'p.charge')
  expect(asked).toHaveBeenCalledTimes(1)
  vi.setSystemTime(11_000)
  await unserved.missing('charge', 'p.charge')
  expect(asked).toHaveBeenCalledTimes(2)
  // Each queue is asked about on its own.
  await transport.declare(Topology.define().queue('p.ship').plan())
  await unserved.missing('ship', 'p.ship')
  expect(asked).toHaveBeenCalledTimes(3)
})

it('watches a queue found to exist, and reports the runs waiting there', async () => {
  await transport.declare(Topology.define().queue('p.charge').queue('p.ship').plan())
  await publishTo('p.charge')
  await publishTo('p.ship')
  await publishTo('p.ship')
  expect(await unserved.missing('charge', 'p.charge')).toBeUndefined()
  expect(await unserved.missing('ship', 'p.ship')).toBeUndefined()
  expect(await unserved.report()).toEqual({
    name: 'pipeline:p',
    status: 'DEGRADED',
    details: { steps: 'a,bill', unserved: 'p.charge=1,p.ship=2' },
  })
})

it('calls a hop tried, and its queue uncounted, when the transport cannot tell whether the queue exists', async () => {
  const blind = new UnservedSteps('p', ['a'], { queueLength: undefined } as unknown as Transport)
  expect(await blind.missing('charge', 'p.charge')).toBeUndefined()
  blind.watch('p.charge')
  blind.watch('p.ship')
  expect(await blind.report()).toEqual({
    name: 'pipeline:p',
    status: 'UP',
    details: { steps: 'a', uncounted: 'p.charge,p.ship' },
  })
})

it('calls a hop tried, and its queue uncounted with the reason, when the broker fails to answer otherwise', async () => {
  const failing = {
    queueLength: () => Promise.reject(new Error('channel closed')),
  } as unknown as Transport
  const unsure = new UnservedSteps('p', ['a', 'b'], failing)
  expect(await unsure.missing('charge', 'p.charge')).toBeUndefined()
  unsure.watch('p.charge')
  expect(await unsure.report()).toEqual({
    name: 'pipeline:p',
    status: 'UP',
    details: { steps: 'a,b', uncounted: 'p.charge (channel closed)' },
  })
  // Not forgotten: the next report asks again.
  expect((await unsure.report()).details).toEqual({
    steps: 'a,b',
    uncounted: 'p.charge (channel closed)',
  })
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
