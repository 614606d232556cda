/**
 * Jobs that travel through Redis (BullMQ queues: shared search tasks, batch jobs) and may run on
 * another replica. ioredis and BullMQ are not instrumented (ioredis's instrumentation patches on
 * require, and this ES module build loads ioredis before the SDK starts), so the server records
 * the messaging spans itself, as the OpenTelemetry messaging conventions name them: a PRODUCER
 * span `send <queue>` around the enqueueing, whose context goes into the job's data as W3C trace
 * context (`traceparent`, `tracestate`), and a CONSUMER span `process <queue>` around the job's
 * run, wherever it runs, a child of the producer's span and linked to it (the conventions require
 * the link and allow the parent for a single message). A job without trace context (enqueued
 * while tracing was off) starts a trace of its own.
 */
import { context, propagation, ROOT_CONTEXT, SpanKind, trace, type Attributes, type Tracer } from '@opentelemetry/api';
import { endWhenSettled } from './spans.js';

/** W3C trace context carried in a job's data (`traceparent`, and `tracestate` when there is one). */
export type TraceCarrier = Record<string, string>;

/** `messaging.system`: BullMQ is the messaging layer; Redis only stores its queues. */
const messagingSystem = 'bullmq';

/**
 * Enqueues in a PRODUCER span `send <queue>`: `send` gets the trace context to put in each job's
 * data. `messages` is how many jobs it sends (`messaging.batch.message_count` when more than one),
 * `messageId` the job's id when it sends one.
 */
export function sendSpan<T>(
  active: Tracer,
  queue: string,
  job: { messages?: number; messageId?: string; attributes?: Attributes },
  send: (carrier: TraceCarrier) => Promise<T>,
): Promise<T> {
  const attributes: Attributes = {
    'messaging.system': messagingSystem,
    'messaging.operation.type': 'send',
    'messaging.operation.name': 'send',
    'messaging.destination.name': queue,
    ...job.attributes,
  };
  if (job.messageId !== undefined) attributes['messaging.message.id'] = job.messageId;
  if (job.messages !== undefined && job.messages !== 1) attributes['messaging.batch.message_count'] = job.messages;
  const span = active.startSpan(`send ${queue}`, { kind: SpanKind.PRODUCER, attributes });
  const carrier: TraceCarrier = {};
  propagation.inject(trace.setSpan(context.active(), span), carrier);
  return endWhenSettled(span, send(carrier));
}

/**
 * Runs a job in a CONSUMER span `process <queue>`, active while it runs: a child of the span that
 * sent the job (from `carrier`) and linked to it; a root span when the job carries no context.
 */
export function processSpan<T>(
  active: Tracer,
  queue: string,
  job: { carrier: TraceCarrier | undefined; messageId: string | undefined; attributes?: Attributes },
  run: () => Promise<T>,
): Promise<T> {
  const parent = job.carrier ? propagation.extract(ROOT_CONTEXT, job.carrier) : ROOT_CONTEXT;
  const producer = trace.getSpanContext(parent);
  const attributes: Attributes = {
    'messaging.system': messagingSystem,
    'messaging.operation.type': 'process',
    'messaging.operation.name': 'process',
    'messaging.destination.name': queue,
    ...job.attributes,
  };
  if (job.messageId !== undefined) attributes['messaging.message.id'] = job.messageId;
  return active.startActiveSpan(
    `process ${queue}`,
    { kind: SpanKind.CONSUMER, attributes, links: producer ? [{ context: producer }] : [] },
    parent,
    (span) => endWhenSettled(span, run()),
  );
}
