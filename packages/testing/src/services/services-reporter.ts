import path from 'node:path'
import type { UserConsoleLog } from 'vitest'
import type { Reporter, TestModule } from 'vitest/node'
import { SKIP_SERVICES_VARIABLE, skippingMissingServices } from './services.js'

/**
 * With `ACEMQ_SKIP_SERVICES=1`, says at the end of the run how many tests it dropped because a
 * service they need was missing, and in which files: a skip is never silent. The files are
 * those whose service check printed the skip (see services.ts); their skipped tests are counted.
 */
export default class ServicesReporter implements Reporter {
  readonly #skippingTasks = new Set<string>()
  readonly #services = new Set<string>()

  onUserConsoleLog(log: UserConsoleLog): void {
    const match = log.content.match(/skipping the tests that need (\S+):/)
    if (match === null || log.taskId === undefined) return
    this.#skippingTasks.add(log.taskId)
    this.#services.add(match[1] ?? '')
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    if (!skippingMissingServices() || this.#skippingTasks.size === 0) return
    let dropped = 0
    const files: string[] = []
    for (const module of testModules) {
      if (![...this.#skippingTasks].some((task) => task.startsWith(module.id))) continue
      let skipped = 0
      for (const test of module.children.allTests()) {
        if (test.result().state === 'skipped') skipped++
      }
      if (skipped > 0) files.push(`  ${path.relative(process.cwd(), module.moduleId)} (${skipped})`)
      dropped += skipped
    }
    const services = [...this.#services].sort().join(', ')
    console.warn(
      [
        '',
        `${SKIP_SERVICES_VARIABLE}=1: dropped ${dropped} test(s) in ${files.length} file(s) because ${services} could not be reached:`,
        ...files,
        '',
      ].join('\n'),
    )
  }
}
