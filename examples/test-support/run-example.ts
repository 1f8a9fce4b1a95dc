import { spawn, type ChildProcess } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const examplesRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

/** An example running as a child process, with its output (stdout and stderr) by line. */
export interface RunningExample {
  readonly process: ChildProcess
  readonly lines: string[]
  /** Everything printed so far. */
  output(): string
  /** Resolves with the first line matching `pattern`; rejects with the output after `timeoutMs`. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>
  /** Resolves with the exit code, or the signal's name; kills the example after `timeoutMs`. */
  exited(timeoutMs?: number): Promise<number | string>
}

/**
 * Starts `examples/<name>/src/main.ts` the way `pnpm --filter <pkg> start` does (tsx, from the
 * packages' sources), in the example's directory, with `env` over the test's environment.
 * A variable set to `undefined` is removed, so `{ AMQP_URL: undefined }` runs the embedded
 * default even where CI sets `AMQP_URL`.
 */
export function startExample(
  name: string,
  env: Record<string, string | undefined> = {},
): RunningExample {
  const environment: NodeJS.ProcessEnv = { ...process.env, ...env }
  for (const [key, value] of Object.entries(env)) if (value === undefined) delete environment[key]
  const child = spawn(
    process.execPath,
    ['--conditions=@acemq/source', '--import', 'tsx', 'src/main.ts'],
    {
      cwd: path.join(examplesRoot, name),
      env: environment,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  )
  const lines: string[] = []
  const waiters = new Set<() => void>()
  let partial = ''
  const onData = (chunk: Buffer): void => {
    const text = partial + chunk.toString()
    const complete = text.split('\n')
    partial = complete.pop() ?? ''
    lines.push(...complete)
    for (const waiter of [...waiters]) waiter()
  }
  child.stdout.on('data', onData)
  child.stderr.on('data', onData)
  const exit = new Promise<number | string>((resolve) => {
    child.on('exit', (code, signal) => {
      if (partial !== '') lines.push(partial)
      resolve(code ?? signal ?? -1)
    })
  })
  const output = (): string => lines.join('\n')

  return {
    process: child,
    lines,
    output,
    waitFor(pattern, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          const line = lines.find((l) => pattern.test(l))
          if (line === undefined) return
          waiters.delete(check)
          clearTimeout(timer)
          resolve(line)
        }
        const timer = setTimeout(() => {
          waiters.delete(check)
          reject(
            new Error(
              `${name} printed no line matching ${pattern} in ${timeoutMs} ms:\n${output()}`,
            ),
          )
        }, timeoutMs)
        waiters.add(check)
        check()
      })
    },
    async exited(timeoutMs = 40_000) {
      let timer: ReturnType<typeof setTimeout> | undefined
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          child.kill('SIGKILL')
          reject(new Error(`${name} did not exit within ${timeoutMs} ms:\n${output()}`))
        }, timeoutMs)
      })
      try {
        return await Promise.race([exit, timeout])
      } finally {
        clearTimeout(timer)
      }
    },
  }
}

/** Runs an example to its end; resolves with its exit code and output. */
export async function runExample(
  name: string,
  env: Record<string, string | undefined> = {},
  timeoutMs?: number,
): Promise<{ readonly code: number | string; readonly output: string }> {
  const example = startExample(name, env)
  const code = await example.exited(timeoutMs)
  return { code, output: example.output() }
}
