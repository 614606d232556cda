/**
 * OpenTelemetry tracing of the real command (`node dist/cli/index.js serve`) against a real OTLP
 * receiver (test/helpers/otlp-receiver.ts): an incoming W3C traceparent continued, the spans of
 * what a request spends its time on and their parents, the batch span's links to every request it
 * served, the GenAI attributes, outgoing fetches carrying the trace, log lines carrying its ids;
 * over OTLP/HTTP protobuf (the default) and JSON.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { listeningUrl, spawnTinyServer, type ServerProcess } from '../helpers/server-process.js';

const serverKind = 2;

/** A caller's trace: its trace id and the id of its span that made the request. */
function callerTrace() {
  return { traceId: randomBytes(16).toString('hex'), parentId: randomBytes(8).toString('hex') };
}

function traceparent({ traceId, parentId }: { traceId: string; parentId: string }): string {
  return `00-${traceId}-${parentId}-01`;
}

/** The span's ancestors, nearest first, within the spans received. */
function ancestors(span: ReceivedSpan, spans: ReceivedSpan[]): ReceivedSpan[] {
  const chain: ReceivedSpan[] = [];
  let parent = spans.find((s) => s.spanId === span.parentSpanId);
  while (parent) {
    chain.push(parent);
    const at = parent;
    parent = spans.find((s) => s.spanId === at.parentSpanId);
  }
  return chain;
}

async function post(base: string, path: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe('tracing over OTLP/HTTP protobuf', () => {
  let receiver: OtlpReceiver;
  let dataDir: string;
  let server: ServerProcess;
  let base: string;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    dataDir = await mkdtemp(join(tmpdir(), 'onnx-gateway-tracing-'));
    server = spawnTinyServer(dataDir, {
      ONNX_GATEWAY_API_KEYS: '',
      // Models load on their first request: requests sent together wait for the load and share a batch.
      ONNX_GATEWAY_PRELOAD: 'false',
      ONNX_GATEWAY_READER_ALLOW_PRIVATE: 'true',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '50',
      OTEL_SERVICE_NAME: '',
      OTEL_TRACES_SAMPLER: '',
      OTEL_EXPORTER_OTLP_PROTOCOL: '',
    });
    base = await listeningUrl(server);
  }, 120_000);
  afterAll(async () => {
    if (server?.child.exitCode === null) server.child.kill('SIGKILL');
    await receiver?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('continues the caller trace through the request, its operation, the queue and the batches that served it', async () => {
    const callers = [callerTrace(), callerTrace(), callerTrace(), callerTrace()];
    const answers = await Promise.all(
      callers.map((caller, i) =>
        post(
          base,
          '/v1/embeddings',
          { model: 'tiny-embedder', input: [`a first text ${i}`, `and a second one, a little longer ${i}`] },
          { traceparent: traceparent(caller), tracestate: 'caller=4' },
        ),
      ),
    );
    for (const answer of answers) expect(answer.status).toBe(200);

    const spans = await receiver.waitFor((received) =>
      callers.every((caller) => received.some((s) => s.traceId === caller.traceId && s.name === 'POST /v1/embeddings')),
    );
    expect(receiver.contentTypes[0]).toBe('application/x-protobuf');
    const batches = spans.filter((s) => s.name === 'inference tiny-embedder');
    expect(batches.length).toBeGreaterThan(0);

    for (const [i, caller] of callers.entries()) {
      const ofTrace = spans.filter((s) => s.traceId === caller.traceId);
      // The request span: the server's, a child of the caller's span, in the caller's trace.
      const request = ofTrace.find((s) => s.name === 'POST /v1/embeddings')!;
      expect(request.kind).toBe(serverKind);
      expect(request.parentSpanId).toBe(caller.parentId);
      expect(request.traceState).toBe('caller=4');
      expect(request.attributes['http.route']).toBe('/v1/embeddings');
      expect(request.attributes['http.response.status_code']).toBe(200);
      expect(request.resource['service.name']).toBe('onnx-gateway');

      // The operation, under the request, with the GenAI conventions' attributes.
      const operation = ofTrace.find((s) => s.name === 'embeddings tiny-embedder')!;
      expect(ancestors(operation, spans)).toContain(request);
      expect(operation.attributes).toMatchObject({
        'gen_ai.operation.name': 'embeddings',
        'gen_ai.request.model': 'tiny-embedder',
        'gen_ai.response.model': 'tiny-embedder',
        'gen_ai.usage.input_tokens': (answers[i]!.body.usage as { prompt_tokens: number }).prompt_tokens,
      });
      // Its parts, each a child of it.
      for (const name of ['tokenize', 'cache lookup', 'queue wait']) {
        const part = ofTrace.find((s) => s.name === name);
        expect(part, name).toBeDefined();
        expect(part!.parentSpanId, name).toBe(operation.spanId);
      }
      expect(ofTrace.find((s) => s.name === 'tokenize')!.attributes['onnx_gateway.inputs']).toBe(2);
      expect(ofTrace.find((s) => s.name === 'cache lookup')!.attributes['onnx_gateway.cache.hits']).toBe(0);

      // The batches that served it link to its operation; its queue wait links to them.
      const serving = batches.filter((b) => b.links.some((link) => link.spanId === operation.spanId));
      expect(serving.length).toBeGreaterThan(0);
      for (const batch of serving)
        expect(batch.links).toContainEqual({ traceId: caller.traceId, spanId: operation.spanId });
      const wait = ofTrace.find((s) => s.name === 'queue wait')!;
      expect(wait.links.map((link) => link.spanId).sort()).toEqual(serving.map((b) => b.spanId).sort());
    }

    // Requests sent together while the model loaded were served by one batch, linked to each.
    const widest = batches.reduce((a, b) => (b.links.length > a.links.length ? b : a));
    expect(widest.links.length).toBeGreaterThan(1);
    expect(widest.attributes['onnx_gateway.batch.requests']).toBe(widest.links.length);
    for (const batch of batches) {
      expect(batch.attributes['onnx_gateway.device']).toBe('cpu');
      expect(batch.attributes['gen_ai.request.model']).toBe('tiny-embedder');
      const size = batch.attributes['onnx_gateway.batch.size'] as number;
      const tokens = batch.attributes['onnx_gateway.batch.tokens'] as number;
      expect(size).toBeGreaterThan(0);
      expect(batch.attributes['onnx_gateway.batch.padded_tokens']).toBeGreaterThanOrEqual(tokens);
      // A batch is a child of the first request it served: it is in that request's trace.
      const parent = spans.find((s) => s.spanId === batch.parentSpanId);
      expect(parent?.name).toBe('embeddings tiny-embedder');
    }
    const served = new Set(batches.flatMap((b) => b.links.map((link) => link.traceId)));
    for (const caller of callers) expect(served).toContain(caller.traceId);

    // The model loaded for the first request: its load is in that request's trace.
    const load = spans.find((s) => s.name === 'load tiny-embedder');
    expect(load).toBeDefined();
    expect(callers.map((c) => c.traceId)).toContain(load!.traceId);
    expect(load!.attributes['onnx_gateway.device']).toBe('cpu');
  });

  it('traces rerank with the GenAI attributes, and a request without a traceparent in a trace of its own', async () => {
    // A probe before it: not traced.
    expect((await fetch(`${base}/health`)).status).toBe(200);
    const answer = await post(base, '/v1/rerank', {
      model: 'tiny-reranker',
      query: 'what is traced',
      documents: ['spans', 'and their links'],
    });
    expect(answer.status).toBe(200);
    const spans = await receiver.waitFor((received) => received.some((s) => s.name === 'rerank tiny-reranker'));
    const operation = spans.find((s) => s.name === 'rerank tiny-reranker')!;
    const request = ancestors(operation, spans).find((s) => s.name === 'POST /v1/rerank')!;
    expect(request.parentSpanId).toBe('');
    expect(operation.attributes).toMatchObject({
      'gen_ai.operation.name': 'rerank',
      'gen_ai.request.model': 'tiny-reranker',
    });
    expect(operation.attributes['gen_ai.usage.input_tokens']).toBeGreaterThan(0);
    const batch = spans.find((s) => s.name === 'inference tiny-reranker')!;
    expect(batch.links).toContainEqual({ traceId: operation.traceId, spanId: operation.spanId });
    expect(spans.filter((s) => s.attributes['http.route'] === '/health')).toEqual([]);
  });

  it('carries the trace on outgoing fetches (the web reader)', async () => {
    const caller = callerTrace();
    const answer = await post(
      base,
      '/v1/web-reader/read',
      { url: `${receiver.url}/page` },
      { traceparent: traceparent(caller) },
    );
    expect(answer.status).toBe(200);
    const sent = receiver.pageFetches.at(-1)!.traceparent as string;
    expect(sent).toMatch(new RegExp(`^00-${caller.traceId}-[0-9a-f]{16}-01$`));
    // The fetch's own span is what the page's server sees as its parent.
    const spans = await receiver.waitFor((received) =>
      received.some((s) => s.traceId === caller.traceId && sent.includes(s.spanId) && s.kind === 3),
    );
    const fetchSpan = spans.find((s) => sent.includes(s.spanId))!;
    expect(fetchSpan.attributes['http.request.method']).toBe('GET');
  });

  it('writes trace_id and span_id on log lines logged inside a request', async () => {
    const caller = callerTrace();
    await post(base, '/v1/embeddings', { model: 'not-served', input: 'x' }, { traceparent: traceparent(caller) });
    const line = await server.waitFor((logged) => logged.trace_id === caller.traceId);
    expect(line.span_id).toMatch(/^[0-9a-f]{16}$/);
  });
});

describe('tracing over OTLP/HTTP JSON', () => {
  let receiver: OtlpReceiver;
  let dataDir: string;
  let server: ServerProcess;
  let base: string;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    dataDir = await mkdtemp(join(tmpdir(), 'onnx-gateway-tracing-json-'));
    server = spawnTinyServer(dataDir, {
      ONNX_GATEWAY_API_KEYS: '',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_SERVICE_NAME: 'gateway-under-test',
      OTEL_BSP_SCHEDULE_DELAY: '50',
    });
    base = await listeningUrl(server);
  }, 120_000);
  afterAll(async () => {
    if (server?.child.exitCode === null) server.child.kill('SIGKILL');
    await receiver?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('exports the same spans as JSON, under the service name set', async () => {
    const caller = callerTrace();
    const answer = await post(
      base,
      '/v1/embeddings',
      { model: 'tiny-embedder', input: 'one text' },
      { traceparent: traceparent(caller) },
    );
    expect(answer.status).toBe(200);
    const spans = await receiver.waitFor((received) =>
      received.some((s) => s.traceId === caller.traceId && s.name === 'inference tiny-embedder'),
    );
    expect(receiver.contentTypes[0]).toBe('application/json');
    const request = spans.find((s) => s.traceId === caller.traceId && s.name === 'POST /v1/embeddings')!;
    expect(request.parentSpanId).toBe(caller.parentId);
    expect(request.resource['service.name']).toBe('gateway-under-test');
    const operation = spans.find((s) => s.traceId === caller.traceId && s.name === 'embeddings tiny-embedder')!;
    expect(operation.attributes['gen_ai.usage.input_tokens']).toBe(
      (answer.body.usage as { prompt_tokens: number }).prompt_tokens,
    );
    const batch = spans.find((s) => s.traceId === caller.traceId && s.name === 'inference tiny-embedder')!;
    expect(batch.links).toEqual([{ traceId: caller.traceId, spanId: operation.spanId }]);
  });
});
