import { describe, expect, it } from 'vitest'
import {
  AceMq,
  ConfigurationError,
  ConsumerOptions,
  InMemoryTransport,
  Topology,
  shutdownOnSignals,
} from '../../src/index.js'

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

describe('shutdownOnSignals', () => {
  it('drains running handlers on SIGTERM, closes, and reports that it finished', async () => {
    const mq = await AceMq.connect(new InMemoryTransport())
    await mq.applyTopology(Topology.define().queue('work'))
    let finished = false
    await mq.consume('work', ConsumerOptions.defaults(), async () => {
      await sleep(200)
      finished = true
    })
    await mq.publisher('', 'work').send({})
    while (mq.inFlight === 0) await sleep(5)
    const handle = shutdownOnSignals(mq, { signals: ['SIGUSR2'], exit: false })
    process.emit('SIGUSR2', 'SIGUSR2')
    const result = await handle.done
    expect(result).toMatchObject({ signal: 'SIGUSR2', drained: true, closed: true })
    expect(finished).toBe(true)
    expect(mq.transport.state.closed).toBe(true)
    expect(process.listenerCount('SIGUSR2')).toBe(0)
  })

  it('reports not drained when the timeout runs out, and still closes', async () => {
    const mq = await AceMq.connect(new InMemoryTransport())
    await mq.applyTopology(Topology.define().queue('slow'))
    await mq.consume('slow', ConsumerOptions.defaults(), async (_m, { signal }) => {
      await new Promise((resolve) => signal.addEventListener('abort', resolve))
    })
    await mq.publisher('', 'slow').send({})
    while (mq.inFlight === 0) await sleep(5)
    const handle = shutdownOnSignals(mq, { signals: ['SIGUSR2'], timeout: 100, exit: false })
    process.emit('SIGUSR2', 'SIGUSR2')
    const result = await handle.done
    expect(result.drained).toBe(false)
    expect(result.closed).toBe(true)
    expect(result.durationMs).toBeLessThan(2_000)
  })

  it('removes its handlers on dispose', async () => {
    const mq = await AceMq.connect(new InMemoryTransport())
    const before = process.listenerCount('SIGUSR2')
    const handle = shutdownOnSignals(mq, { signals: ['SIGUSR2'], exit: false })
    expect(process.listenerCount('SIGUSR2')).toBe(before + 1)
    handle.dispose()
    expect(process.listenerCount('SIGUSR2')).toBe(before)
    await mq.close()
  })

  it('refuses bad options', async () => {
    const mq = await AceMq.connect(new InMemoryTransport())
    expect(() => shutdownOnSignals(mq, { signals: [] })).toThrow(ConfigurationError)
    expect(() => shutdownOnSignals(mq, { timeout: -1 })).toThrow(/options.timeout/)
    await mq.close()
  })
})
