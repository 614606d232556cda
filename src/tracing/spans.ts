/**
 * The spans the server records, through @opentelemetry/api only. While tracing is off `tracer` is
 * undefined and every call site reads `tracer?.…` or `tracer ? … : …`: no span, no attributes
 * object, no context lookup, nothing but that read. tracing/sdk.ts sets it once the SDK runs.
 */
import {
  context,
  propagation,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Link,
  type Span,
  type SpanContext,
  type Tracer,
} from '@opentelemetry/api';
import { redactUrl } from '../redact-url.js';

/** The server's tracer while tracing is on; undefined while it is off. */
export let tracer: Tracer | undefined;

export function setTracer(next: Tracer | undefined): void {
  tracer = next;
}

/** The OpenTelemetry GenAI operation names of the inference operations. */
export type GenAiOperation = 'embeddings' | 'rerank' | 'classify';

/** The parts of an operation's result its span reports. */
export interface OperationOutcome {
  /** The model that served it (the request may name an alias or none). */
  model: string;
  /** Tokens fed to the model, special tokens included. */
  inputTokens: number;
}

/**
 * Runs an inference operation in its span (`embeddings <model>`, with the GenAI conventions'
 * attributes), the active span while it runs, so its tokenisation, cache lookup, queue wait and
 * model load are its children and the batches that serve it link to it.
 */
export function operationSpan<T>(
  active: Tracer,
  operation: GenAiOperation,
  requestModel: string | undefined,
  run: () => Promise<T>,
  outcome: (result: T) => OperationOutcome,
): Promise<T> {
  const name = requestModel ? `${operation} ${requestModel}` : operation;
  const attributes: Attributes = { 'gen_ai.operation.name': operation };
  if (requestModel) attributes['gen_ai.request.model'] = requestModel;
  return active.startActiveSpan(name, { attributes }, async (span) => {
    try {
      const result = await run();
      const { model, inputTokens } = outcome(result);
      span.setAttribute('gen_ai.response.model', model);
      span.setAttribute('gen_ai.usage.input_tokens', inputTokens);
      if (!requestModel) span.setAttribute('gen_ai.request.model', model);
      return result;
    } catch (error) {
      failed(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}

/** Runs `run` in a span of its own, active while it runs; ended (with its error) when it settles. */
export async function inSpan<T>(
  active: Tracer,
  name: string,
  attributes: Attributes,
  run: (span: Span) => Promise<T>,
): Promise<T> {
  return active.startActiveSpan(name, { attributes }, async (span) => {
    try {
      return await run(span);
    } catch (error) {
      failed(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}

/**
 * An outgoing request made with node:http (the web reader's; undici's instrumentation sees the
 * fetches): its CLIENT span, and the headers (traceparent, tracestate) that carry it to the server.
 */
export function clientSpan<T>(
  active: Tracer,
  method: string,
  url: URL,
  run: (headers: Record<string, string>) => Promise<T>,
  statusOf: (result: T) => number,
): Promise<T> {
  const attributes: Attributes = {
    'http.request.method': method,
    'url.full': redactUrl(url.href),
    'server.address': url.hostname,
  };
  if (url.port) attributes['server.port'] = Number(url.port);
  const span = active.startSpan(method, { kind: SpanKind.CLIENT, attributes });
  const headers: Record<string, string> = {};
  propagation.inject(trace.setSpan(context.active(), span), headers);
  return endWhenSettled(
    span,
    run(headers).then((result) => {
      const status = statusOf(result);
      span.setAttribute('http.response.status_code', status);
      if (status >= 400) span.setStatus({ code: SpanStatusCode.ERROR });
      return result;
    }),
  );
}

/** Ends `span` when `work` settles, marked failed when it rejects. */
export function endWhenSettled<T>(span: Span, work: Promise<T>): Promise<T> {
  return work.then(
    (result) => {
      span.end();
      return result;
    },
    (error: unknown) => {
      failed(span, error);
      span.end();
      throw error;
    },
  );
}

/**
 * A span for work already done, from two `performance.now()` readings (tokenising, a cache
 * lookup): recorded after the fact, so the work itself runs as it would untraced.
 */
export function recordSpan(active: Tracer, name: string, startedAt: number, endedAt: number, attributes: Attributes) {
  active.startSpan(name, { attributes, startTime: epochMs(startedAt) }).end(epochMs(endedAt));
}

/** What a tokenize span says: how many inputs, how many tokens they came to. */
export function tokenizeAttributes(inputs: number, tokens: number): Attributes {
  return { 'onnx_gateway.inputs': inputs, 'gen_ai.usage.input_tokens': tokens };
}

/** A `performance.now()` reading as the epoch milliseconds spans take. */
export function epochMs(now: number): number {
  return performance.timeOrigin + now;
}

/** Marks a span failed with an error's message (an ApiError's code too, as `error.type`). */
export function failed(span: Span, error: unknown): void {
  const message = error instanceof Error ? error.message : String(error);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
  const code = (error as { code?: unknown } | undefined)?.code;
  span.setAttribute('error.type', typeof code === 'string' ? code : error instanceof Error ? error.name : 'Error');
}

/** The span active here, as a link target: undefined when none is recording. */
export function activeSpanContext(): SpanContext | undefined {
  const span = trace.getSpan(context.active());
  return span?.isRecording() ? span.spanContext() : undefined;
}

/** Links to distinct span contexts, in the order given. */
export function linksTo(contexts: Iterable<SpanContext | undefined>): Link[] {
  const links: Link[] = [];
  const seen = new Set<string>();
  for (const linked of contexts) {
    if (!linked || seen.has(linked.spanId)) continue;
    seen.add(linked.spanId);
    links.push({ context: linked });
  }
  return links;
}

/**
 * The ids a log line carries while a span is active (pino's mixin): `trace_id` and `span_id` as
 * the OpenTelemetry log data model names them, so a log backend can jump to the trace.
 */
export function traceLogFields(): { trace_id?: string; span_id?: string; trace_flags?: string } {
  const span = trace.getSpan(context.active());
  if (!span) return {};
  const { traceId, spanId, traceFlags } = span.spanContext();
  return { trace_id: traceId, span_id: spanId, trace_flags: `0${traceFlags.toString(16)}` };
}
