import { spawn } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
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

/** Collects the process warnings and unhandled rejections raised while `run` runs (and a tick after). */
async function watchProcess(
  run: () => Promise<void>,
): Promise<{ warnings: Error[]; unhandled: unknown[] }> {
  const warnings: Error[] = []
  const unhandled: unknown[] = []
  const onWarning = (warning: Error): void => {
    warnings.push(warning)
  }
  const onUnhandled = (reason: unknown): void => {
    unhandled.push(reason)
  }
  process.on('warning', onWarning)
  process.on('unhandledRejection', onUnhandled)
  try {
    await run()
    // Warnings are emitted on the next tick, unhandled rejections after the microtasks.
    await new Promise((resolve) => setImmediate(resolve))
    await sleep(10)
  } finally {
    process.off('warning', onWarning)
    process.off('unhandledRejection', onUnhandled)
  }
  return { warnings, unhandled }
}

/** Runs `support/<name>` in a child process, sends it SIGTERM once it prints "ready". */
async function runSupport(
  name: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const script = path.join(path.dirname(fileURLToPath(import.meta.url)), 'support', name)
  const child = spawn(process.execPath, ['--import', 'tsx', script], { stdio: 'pipe' })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => {
    const sawReady = stdout.includes('ready')
    stdout += chunk.toString()
    if (!sawReady && stdout.includes('ready')) child.kill('SIGTERM')
  })
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const code = await new Promise<number | null>((resolve) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      resolve(null)
    }, 20_000)
    child.on('exit', (exitCode) => {
      clearTimeout(timer)
      resolve(exitCode)
    })
  })
  return { code, stdout, stderr }
}

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

  it('with exit: false, an onShutdown that throws leaves no unhandled rejection and is reported as a warning', async () => {
    const mq = await AceMq.connect(new InMemoryTransport())
    let result: unknown
    const { warnings, unhandled } = await watchProcess(async () => {
      const handle = shutdownOnSignals(mq, {
        signals: ['SIGUSR2'],
        exit: false,
        onShutdown: () => {
          throw new Error('the logger is gone')
        },
      })
      process.emit('SIGUSR2', 'SIGUSR2')
      result = await handle.done
    })
    expect(unhandled).toStrictEqual([])
    expect(result).toMatchObject({ signal: 'SIGUSR2', drained: true, closed: true })
    const reported = warnings.find((warning) => warning.name === 'AceMqWarning')
    expect(reported?.message).toBe('shutdownOnSignals: onShutdown threw: the logger is gone')
    expect(mq.transport.state.closed).toBe(true)
    expect(process.listenerCount('SIGUSR2')).toBe(0)
  })

  it('with exit: true, an onShutdown that throws is printed as a warning and the process still exits 0', async () => {
    const script = path.join(
      path.dirname(fileURLToPath(import.meta.url)),
      'support',
      'exit-on-signal.ts',
    )
    const child = spawn(process.execPath, ['--import', 'tsx', script], { stdio: 'pipe' })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString()
      if (stdout.includes('ready')) child.kill('SIGTERM')
    })
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    const code = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL')
        resolve(null)
      }, 20_000)
      child.on('exit', (exitCode) => {
        clearTimeout(timer)
        resolve(exitCode)
      })
    })
    expect(code, stderr).toBe(0)
    expect(stderr).toContain(
      'AceMqWarning: shutdownOnSignals: onShutdown threw: the logger is gone',
    )
  })

  it('awaits an async onShutdown before done resolves: the application closes its own things in order', async () => {
    const mq = await AceMq.connect(new InMemoryTransport())
    const closed: string[] = []
    const handle = shutdownOnSignals(mq, {
      signals: ['SIGUSR2'],
      exit: false,
      onShutdown: async () => {
        for (const resource of ['http server', 'pg pool', 'otel sdk']) {
          await sleep(30)
          closed.push(resource)
        }
      },
    })
    process.emit('SIGUSR2', 'SIGUSR2')
    await handle.done
    expect(closed).toStrictEqual(['http server', 'pg pool', 'otel sdk'])
  })

  it('with exit: false, an async onShutdown that rejects is a warning, never an unhandled rejection', async () => {
    const mq = await AceMq.connect(new InMemoryTransport())
    const { warnings, unhandled } = await watchProcess(async () => {
      const handle = shutdownOnSignals(mq, {
        signals: ['SIGUSR2'],
        exit: false,
        onShutdown: async () => {
          await sleep(10)
          throw new Error('the pool was already closed')
        },
      })
      process.emit('SIGUSR2', 'SIGUSR2')
      expect(await handle.done).toMatchObject({ drained: true, closed: true })
    })
    expect(unhandled).toStrictEqual([])
    const reported = warnings.find((warning) => warning.name === 'AceMqWarning')
    expect(reported?.message).toBe(
      'shutdownOnSignals: onShutdown threw: the pool was already closed',
    )
  })

  it('with exit: true, the process exits only after an async onShutdown has finished', async () => {
    const { code, stdout, stderr } = await runSupport('exit-after-async-shutdown.ts')
    expect(code, stderr).toBe(0)
    expect(stdout.split('\n').filter((line) => line.startsWith('closed'))).toStrictEqual([
      'closed http server',
      'closed pg pool',
      'closed otel sdk',
    ])
  })

  it('with exit: false, a drain that throws at once still closes, resolves done and rejects nothing', async () => {
    const mq = await AceMq.connect(new InMemoryTransport())
    const drainable = {
      drainConsumers: (): Promise<boolean> => {
        throw new Error('not a promise')
      },
      close: (options?: { readonly drainTimeout?: number | `${number}ms` }) => mq.close(options),
    }
    let result: unknown
    const { unhandled } = await watchProcess(async () => {
      const handle = shutdownOnSignals(drainable, { signals: ['SIGUSR2'], exit: false })
      process.emit('SIGUSR2', 'SIGUSR2')
      result = await handle.done
    })
    expect(unhandled).toStrictEqual([])
    expect(result).toMatchObject({ drained: false, closed: true })
    expect(mq.transport.state.closed).toBe(true)
  })

  it('twenty connections waiting on one signal share one listener: no MaxListenersExceededWarning', async () => {
    const connections = await Promise.all(
      Array.from({ length: 20 }, () => AceMq.connect(new InMemoryTransport())),
    )
    const before = process.listenerCount('SIGUSR2')
    let results: unknown[] = []
    const { warnings } = await watchProcess(async () => {
      const handles = connections.map((mq) =>
        shutdownOnSignals(mq, { signals: ['SIGUSR2'], exit: false }),
      )
      expect(process.listenerCount('SIGUSR2')).toBe(before + 1)
      process.emit('SIGUSR2', 'SIGUSR2')
      results = await Promise.all(handles.map((handle) => handle.done))
    })
    expect(warnings.map((warning) => warning.name)).not.toContain('MaxListenersExceededWarning')
    expect(results).toHaveLength(20)
    for (const result of results) expect(result).toMatchObject({ drained: true, closed: true })
    for (const mq of connections) expect(mq.transport.state.closed).toBe(true)
    expect(process.listenerCount('SIGUSR2')).toBe(before)
  })

  it('disposing one of several handles leaves the others handling the signal', async () => {
    const [first, second] = await Promise.all([
      AceMq.connect(new InMemoryTransport()),
      AceMq.connect(new InMemoryTransport()),
    ])
    if (first === undefined || second === undefined) throw new Error('no connections')
    const disposed = shutdownOnSignals(first, { signals: ['SIGUSR2'], exit: false })
    const kept = shutdownOnSignals(second, { signals: ['SIGUSR2'], exit: false })
    disposed.dispose()
    expect(process.listenerCount('SIGUSR2')).toBe(1)
    process.emit('SIGUSR2', 'SIGUSR2')
    await kept.done
    expect(second.transport.state.closed).toBe(true)
    expect(first.transport.state.closed).toBe(false)
    expect(process.listenerCount('SIGUSR2')).toBe(0)
    await first.close()
  })

  it('a second signal while draining cuts the drain short: not drained, still closed', async () => {
    const mq = await AceMq.connect(new InMemoryTransport())
    await mq.applyTopology(Topology.define().queue('stuck'))
    await mq.consume('stuck', ConsumerOptions.defaults(), async (_m, { signal }) => {
      await new Promise((resolve) => signal.addEventListener('abort', resolve))
    })
    await mq.publisher('', 'stuck').send({})
    while (mq.inFlight === 0) await sleep(5)
    const handle = shutdownOnSignals(mq, { signals: ['SIGUSR2'], timeout: '1h', exit: false })
    process.emit('SIGUSR2', 'SIGUSR2')
    await sleep(20)
    process.emit('SIGUSR2', 'SIGUSR2')
    const result = await handle.done
    expect(result).toMatchObject({ drained: false, closed: true })
    expect(result.durationMs).toBeLessThan(10_000)
  })

  it('refuses bad options', async () => {
    const mq = await AceMq.connect(new InMemoryTransport())
    expect(() => shutdownOnSignals(mq, { signals: [] })).toThrow(ConfigurationError)
    expect(() => shutdownOnSignals(mq, { timeout: -1 })).toThrow(/options.timeout/)
    await mq.close()
  })
})
