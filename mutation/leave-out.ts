import { beforeEach } from 'vitest'

// A setup file of the mutation run (mutation/vitest.config.ts): skips the tests a target leaves
// out (`leaveOut` in mutation/targets.mjs, passed by mutation/stryker.config.mjs), matched by
// their own name. They are the ones that wait real time; the ordinary suite still runs them.
const leftOut = new Set<string>(
  JSON.parse(process.env['ACEMQ_MUTATION_LEAVE_OUT'] ?? '[]') as string[],
)

if (leftOut.size > 0) {
  beforeEach((context) => {
    if (leftOut.has(context.task.name)) context.skip('left out of the mutation run (slow)')
  })
}
