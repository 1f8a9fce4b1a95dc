import { diag } from '@opentelemetry/api'

/**
 * Reports a failure inside the instrumentation (a throwing propagator, sampler or span
 * processor) to OpenTelemetry's diagnostic logger. Telemetry must never throw into the
 * engine: a throw there could leave a delivery unsettled or crash the process.
 */
export function reportFailure(what: string, error: unknown): void {
  try {
    diag.error(`@acemq/otel: ${what} failed; carrying on without it`, error)
  } catch {
    // A logger that throws has nowhere left to report to.
  }
}
