/**
 * `node --conditions=@acemq/source --import tsx test-support/netns-reap.ts`: removes the
 * namespaces, links, nodes and folders that partition runs whose process is gone left behind
 * (a run killed with SIGKILL has no chance to), then fails if a namespace of this library is
 * still there. CI runs it after `pnpm test:partitions`, whatever that run's outcome.
 */
import { leftoverNamespaces, reapOrphans } from './netns-cluster.js'

await reapOrphans()
const left = await leftoverNamespaces()
if (left.length > 0) {
  console.error(`network namespaces still there after the partition run: ${left.join(', ')}`)
  process.exit(1)
}
console.log('no partition-test namespace left')
