import { execFile } from 'node:child_process'
import { mkdirSync, readdirSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const run = promisify(execFile)

/** The repository's root. */
export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')

/** Runs a command; on failure, the error carries its output. */
export async function sh(
  command: string,
  args: readonly string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv; timeout?: number },
): Promise<string> {
  try {
    const { stdout, stderr } = await run(command, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      timeout: options.timeout ?? 600_000,
      maxBuffer: 64 * 1024 * 1024,
    })
    return `${stdout}${stderr}`
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string }
    throw new Error(
      `${command} ${args.join(' ')} failed in ${options.cwd}:\n${stdout ?? ''}${stderr ?? ''}`,
      {
        cause: error,
      },
    )
  }
}

/**
 * Builds the workspace, then packs `packages/<name>` for each name into `packs`, as `pnpm pack`
 * publishes them: the tarballs' paths by package name (`@acemq/core` → `/…/acemq-core-0.1.0.tgz`).
 */
export async function packPackages(
  names: readonly string[],
  packs: string,
): Promise<Record<string, string>> {
  // The tarballs hold dist/: build first (turbo answers from its cache when nothing changed).
  await sh('pnpm', ['build'], { cwd: root })
  mkdirSync(packs, { recursive: true })
  const tarballs: Record<string, string> = {}
  for (const name of names) {
    const before = new Set(readdirSync(packs))
    await sh('pnpm', ['pack', '--pack-destination', packs], {
      cwd: path.join(root, 'packages', name),
    })
    const [tarball] = readdirSync(packs).filter((file) => !before.has(file))
    if (tarball === undefined) throw new Error(`pnpm pack made no tarball for ${name}`)
    tarballs[`@acemq/${name}`] = path.join(packs, tarball)
  }
  return tarballs
}
