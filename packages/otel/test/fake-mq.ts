import type { Instrumentation } from '@acemq/core'
import type { InstrumentableMq } from '../src/index.js'

/** The slice of a connection `instrument` needs, so the seam can be driven directly. */
export class FakeMq implements InstrumentableMq {
  instrumentation: Instrumentation | undefined
  inFlight = 0

  setInstrumentation(instrumentation: Instrumentation | undefined): void {
    this.instrumentation = instrumentation
  }

  /** The installed instrumentation; throws when there is none. */
  get installed(): Instrumentation {
    if (this.instrumentation === undefined) throw new Error('nothing is installed')
    return this.instrumentation
  }
}
