import {
  ROOT_CONTEXT,
  SpanKind,
  context,
  propagation,
  trace,
  type Attributes,
} from '@opentelemetry/api'
import type { Instrumentation } from '@acemq/core'
import type {
  InterceptorFailureInfo,
  OutboxRelayInfo,
  PipelineRunInfo,
  RequestSettledInfo,
  ScheduleEventInfo,
  ProcessInfo,
  ProcessScope,
  PublishInfo,
  PublishScope,
} from '@acemq/core/spi'
import { ACEMQ_ATTRIBUTES, ACEMQ_LABELS } from '../names.js'
import { headerGetter, headerSetter } from './header-carrier.js'
import type { Instruments } from './instruments.js'
import { ProcessSpanScope } from './process-span-scope.js'
import { PublishSpanScope } from './publish-span-scope.js'
import { reportFailure } from './report-failure.js'

const RABBITMQ = 'rabbitmq'

/** The seam core calls, translated into spans and metrics. */
export class OtelInstrumentation implements Instrumentation {
  readonly #instruments: Instruments

  constructor(instruments: Instruments) {
    this.#instruments = instruments
  }

  publishStarted(info: PublishInfo): PublishScope | undefined {
    try {
      return this.#publishStarted(info)
    } catch (error) {
      reportFailure('starting a publish span', error)
      return undefined
    }
  }

  processStarted(info: ProcessInfo): ProcessScope | undefined {
    try {
      return this.#processStarted(info)
    } catch (error) {
      reportFailure('starting a process span', error)
      return undefined
    }
  }

  rungMissing(queue: string, rung: string): void {
    const instruments = this.#instruments
    if (!instruments.recording) return
    try {
      instruments.rungMissing.add(1, { [ACEMQ_LABELS.queue]: queue, [ACEMQ_LABELS.rung]: rung })
    } catch (error) {
      reportFailure('counting a missing rung', error)
    }
  }

  outboxRelayed(info: OutboxRelayInfo): void {
    const instruments = this.#instruments
    if (!instruments.recording) return
    try {
      const labels = {
        [ACEMQ_LABELS.exchange]: info.exchange,
        [ACEMQ_LABELS.routingKey]: info.routingKey,
        [ACEMQ_LABELS.outcome]: info.outcome,
      }
      instruments.outboxTotal.add(1, labels)
      instruments.outboxLag.record(info.lagMs / 1000, labels)
    } catch (error) {
      reportFailure('counting an outbox record', error)
    }
  }

  pipelineRunFinished(info: PipelineRunInfo): void {
    const instruments = this.#instruments
    if (!instruments.recording) return
    try {
      const labels = {
        [ACEMQ_LABELS.pipeline]: info.pipeline,
        [ACEMQ_LABELS.step]: info.step,
        [ACEMQ_LABELS.outcome]: info.outcome,
      }
      instruments.pipelineRunTotal.add(1, labels)
      instruments.pipelineRunDuration.record(info.durationMs / 1000, labels)
    } catch (error) {
      reportFailure('counting a pipeline run', error)
    }
  }

  interceptorFailed(info: InterceptorFailureInfo): void {
    const instruments = this.#instruments
    if (!instruments.recording) return
    try {
      instruments.interceptorFailed.add(1, {
        [ACEMQ_LABELS.queue]: info.queue,
        [ACEMQ_LABELS.interceptor]: info.interceptor,
        [ACEMQ_LABELS.phase]: info.phase,
      })
    } catch (error) {
      reportFailure('counting an interceptor failure', error)
    }
  }

  requestSettled(info: RequestSettledInfo): void {
    this.#count('counting a request', (instruments) =>
      instruments.requestTotal.add(1, {
        [ACEMQ_LABELS.role]: info.role,
        [ACEMQ_LABELS.destination]: info.destination,
        [ACEMQ_LABELS.outcome]: info.outcome,
      }),
    )
  }

  scheduleEvent(info: ScheduleEventInfo): void {
    this.#count('counting a scheduled message', (instruments) =>
      instruments.scheduleTotal.add(1, {
        [ACEMQ_LABELS.exchange]: info.exchange,
        [ACEMQ_LABELS.routingKey]: info.routingKey,
        [ACEMQ_LABELS.outcome]: info.outcome,
      }),
    )
  }

  #count(what: string, record: (instruments: Instruments) => void): void {
    const instruments = this.#instruments
    if (!instruments.recording) return
    try {
      record(instruments)
    } catch (error) {
      reportFailure(what, error)
    }
  }

  #publishStarted(info: PublishInfo): PublishScope {
    const instruments = this.#instruments
    const route = instruments.route(info.exchange, info.routingKey)
    // A publish continues whatever trace its caller is in (a handler's process span, a
    // request's server span): the ambient context is the parent here, and only here.
    const parent = context.active()
    const attributes: Attributes = {
      [ACEMQ_ATTRIBUTES.system]: RABBITMQ,
      [ACEMQ_ATTRIBUTES.operationType]: 'publish',
      [ACEMQ_ATTRIBUTES.operationName]: 'publish',
      [ACEMQ_ATTRIBUTES.destinationName]: route.destination,
      [ACEMQ_ATTRIBUTES.routingKey]: info.routingKey,
      [ACEMQ_ATTRIBUTES.messageId]: info.messageId,
      [ACEMQ_ATTRIBUTES.conversationId]: info.correlation,
    }
    const span = instruments.tracer.startSpan(
      route.spanName,
      { kind: SpanKind.PRODUCER, attributes },
      parent,
    )
    try {
      propagation.inject(trace.setSpan(parent, span), info.headers, headerSetter)
    } catch (error) {
      reportFailure('writing trace context into the headers', error)
    }
    return new PublishSpanScope(instruments, route, span)
  }

  #processStarted(info: ProcessInfo): ProcessScope {
    const instruments = this.#instruments
    const queue = instruments.queue(info.queue)
    // The parent is the publish that sent this message, from its headers, never whatever
    // happens to be active where the delivery arrived.
    let parent = ROOT_CONTEXT
    try {
      parent = propagation.extract(ROOT_CONTEXT, info.headers, headerGetter)
    } catch (error) {
      reportFailure('reading trace context from the headers', error)
    }
    const attributes: Attributes = {
      [ACEMQ_ATTRIBUTES.system]: RABBITMQ,
      [ACEMQ_ATTRIBUTES.operationType]: 'process',
      [ACEMQ_ATTRIBUTES.operationName]: 'process',
      [ACEMQ_ATTRIBUTES.destinationName]: info.queue,
      [ACEMQ_ATTRIBUTES.messageId]: info.messageId,
      [ACEMQ_ATTRIBUTES.conversationId]: info.correlation,
      [ACEMQ_ATTRIBUTES.attempt]: info.attempt,
    }
    const span = instruments.tracer.startSpan(
      queue.spanName,
      { kind: SpanKind.CONSUMER, attributes },
      parent,
    )
    return new ProcessSpanScope(instruments, queue, span, trace.setSpan(parent, span))
  }
}
