import { randomUUID } from 'node:crypto'
import { mkdir, readFile, readdir, rename, rm, stat, utimes, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { ConfigurationError } from '../errors.js'
import { assertClaimCheckKey, assertExpiresAt, type ClaimCheckStore } from './claim-check-store.js'

const SUFFIX = '.body'

function missing(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === 'ENOENT'
}

/**
 * A {@link ClaimCheckStore} on the filesystem: one file per body in `directory` (a shared volume
 * when publishers and consumers run on several machines), written to a temporary name and
 * renamed, so a reader never sees half a body. A body's expiry is its file's modification time.
 *
 * @example
 * ```ts
 * const store = new FileClaimCheckStore('/var/lib/orders/claim-checks')
 * ```
 */
export class FileClaimCheckStore implements ClaimCheckStore {
  readonly directory: string

  constructor(directory: string) {
    if (typeof directory !== 'string' || directory === '') {
      throw new ConfigurationError(
        `FileClaimCheckStore(directory) must be a directory path; got ${JSON.stringify(directory)}`,
      )
    }
    this.directory = path.resolve(directory)
  }

  #file(key: string): string {
    return path.join(this.directory, key + SUFFIX)
  }

  async put(key: string, body: Uint8Array, expiresAt: number): Promise<void> {
    assertClaimCheckKey(key, 'put(key)')
    assertExpiresAt(expiresAt, 'put(expiresAt)')
    if (!(body instanceof Uint8Array)) {
      throw new ConfigurationError(`put(body) must be a Uint8Array; got ${typeof body}`)
    }
    await mkdir(this.directory, { recursive: true })
    // A dot-name: never a key (keys do not start with '.'), so purge and get never see it.
    const temporary = path.join(this.directory, `.${randomUUID()}.tmp`)
    try {
      await writeFile(temporary, body)
      const when = expiresAt / 1000
      await utimes(temporary, when, when)
      await rename(temporary, this.#file(key))
    } catch (error) {
      await rm(temporary, { force: true })
      throw error
    }
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    assertClaimCheckKey(key, 'get(key)')
    try {
      return await readFile(this.#file(key))
    } catch (error) {
      if (missing(error)) return undefined
      throw error
    }
  }

  async delete(key: string): Promise<void> {
    assertClaimCheckKey(key, 'delete(key)')
    await rm(this.#file(key), { force: true })
  }

  async purgeExpired(now: number = Date.now()): Promise<number> {
    assertExpiresAt(now, 'purgeExpired(now)')
    let names: string[]
    try {
      names = await readdir(this.directory)
    } catch (error) {
      if (missing(error)) return 0
      throw error
    }
    let removed = 0
    for (const name of names) {
      if (!name.endsWith(SUFFIX) || name.startsWith('.')) continue
      const file = path.join(this.directory, name)
      try {
        if ((await stat(file)).mtimeMs > now) continue
        await rm(file)
        removed += 1
      } catch (error) {
        // Another purger took it first.
        if (!missing(error)) throw error
      }
    }
    return removed
  }
}
