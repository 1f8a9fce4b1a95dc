export { instrument, type InstrumentOptions, type InstrumentableMq } from './instrument.js'
export {
  ACEMQ_ATTRIBUTES,
  ACEMQ_EVENTS,
  ACEMQ_LABELS,
  ACEMQ_METRICS,
  INSTRUMENTATION_SCOPE,
} from './names.js'
