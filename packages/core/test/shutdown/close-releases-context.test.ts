import { AsyncLocalStorage } from 'node:async_hooks'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { AceMq, ConsumerOptions, InMemoryTransport, Topology } from '../../src/index.js'

describe('closing a connection', () => {
  afterEach(() => {
    vi.restoreAllMocks()
  })

  it('disables its async context, so a closed connection costs later promises nothing', async () => {
    const disabled = vi.spyOn(AsyncLocalStorage.prototype, 'disable')
    const mq = await AceMq.connect(new InMemoryTransport())
    await mq.applyTopology(Topology.define().queueWithDeadLetter('context'))
    let handled = false
    await mq.consume('context', ConsumerOptions.defaults(), () => {
      handled = true
    })
    await mq.publisher('', 'context').send({})
    while (!handled) await new Promise((resolve) => setTimeout(resolve, 5))
    expect(disabled).not.toHaveBeenCalled()
    await mq.close()
    // An enabled AsyncLocalStorage stays in Node's global list (and every new promise walks
    // that list) until it is disabled.
    expect(disabled).toHaveBeenCalledTimes(1)
  })
})
