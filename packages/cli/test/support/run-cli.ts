import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))

/** The built binary, as `npx acemq` runs it. */
export const BIN = path.resolve(here, '../../dist/bin.js')

/** What one run of the binary did. */
export interface CliRun {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/**
 * Runs the built `acemq` binary in a process of its own and collects what it printed. Fails
 * with a clear message when the package has not been built.
 */
export function runCli(
  args: readonly string[],
  options: { readonly env?: Record<string, string | undefined>; readonly timeoutMs?: number } = {},
): Promise<CliRun> {
  if (!existsSync(BIN)) {
    throw new Error(`${BIN} does not exist: build the package first (pnpm build)`)
  }
  return new Promise((resolve, reject) => {
    const env: Record<string, string | undefined> = { ...process.env, ...options.env }
    for (const [key, value] of Object.entries(env)) if (value === undefined) delete env[key]
    const child = spawn(process.execPath, [BIN, ...args], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`acemq ${args.join(' ')} did not finish in time:\n${stdout}\n${stderr}`))
    }, options.timeoutMs ?? 60_000)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}
