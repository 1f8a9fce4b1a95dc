import { describe, expect, it } from 'vitest'
import { Permits } from '../../src/internal/permits.js'

describe('Permits', () => {
  it('hands permits out up to the limit and gives released ones to the oldest waiter', async () => {
    const permits = new Permits(2)
    expect(permits.tryAcquire()).toBe(true)
    expect(permits.tryAcquire()).toBe(true)
    expect(permits.tryAcquire()).toBe(false)
    const order: string[] = []
    const first = permits.acquire(undefined).then(() => order.push('first'))
    const second = permits.acquire(undefined).then(() => order.push('second'))
    permits.release()
    await first
    expect(permits.inUse).toBe(2)
    permits.release()
    await second
    expect(order).toEqual(['first', 'second'])
  })

  it('lets a waiter give up through its signal without losing a permit', async () => {
    const permits = new Permits(1)
    permits.tryAcquire()
    const controller = new AbortController()
    const waiting = permits.acquire(controller.signal)
    controller.abort()
    await expect(waiting).rejects.toHaveProperty('name', 'AbortError')
    permits.release()
    expect(permits.inUse).toBe(0)
    expect(permits.tryAcquire()).toBe(true)
  })

  it('rejects an already aborted acquire at once', async () => {
    const permits = new Permits(1)
    permits.tryAcquire()
    await expect(permits.acquire(AbortSignal.abort())).rejects.toHaveProperty('name', 'AbortError')
  })

  it('ends every wait on rejectWaiters, and never counts more permits than it has', async () => {
    const permits = new Permits(1)
    permits.tryAcquire()
    const waiting = permits.acquire(undefined)
    permits.rejectWaiters(new Error('closed'))
    await expect(waiting).rejects.toThrow('closed')
    permits.release()
    permits.release()
    expect(permits.inUse).toBe(0)
    expect(permits.tryAcquire()).toBe(true)
    expect(permits.tryAcquire()).toBe(false)
  })
})
