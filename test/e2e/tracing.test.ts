/**
 * OpenTelemetry tracing of the real command (`node dist/cli/index.js serve`) against a real OTLP
 * receiver (test/helpers/otlp-receiver.ts): an incoming W3C traceparent continued, the spans of
 * what a request spends its time on and their parents, the batch span's links to every request it
 * served, the GenAI attributes, image edits' stages, outgoing fetches carrying the trace, log lines
 * carrying its ids; jobs through Redis (shared search tasks, batch jobs) continuing the trace of
 * the request that queued them on another replica; over OTLP/HTTP protobuf (the default) and JSON.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStandInSearxng, type StandInSearxng } from '../fixtures/stand-in-searxng.js';
import { writeTinyImageModels } from '../fixtures/tiny-image-model.js';
import { uploadEmbeddingRequests } from '../helpers/batch-files.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { hasRedisServer, REDIS_SKIP_REASON, startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { missing } from '../helpers/resources.js';
import { listeningUrl, spawnTinyServer, type ServerProcess } from '../helpers/server-process.js';

const serverKind = 2;
const producerKind = 4;
const consumerKind = 5;

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
    const imageDir = join(dataDir, 'images');
    await mkdir(imageDir);
    await writeTinyImageModels(imageDir);
    server = spawnTinyServer(dataDir, {
      ONNX_GATEWAY_API_KEYS: '',
      ONNX_GATEWAY_IMAGE_MODELS: 'tiny-upscaler',
      ONNX_GATEWAY_IMAGE_MODELS_DIR: imageDir,
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

  it('traces an image edit: its decodes, model runs and encodes, with their sizes', async () => {
    const caller = callerTrace();
    const rgb = await sharp({ create: { width: 30, height: 20, channels: 3, background: '#336699' } })
      .png()
      .toBuffer();
    const rgba = await sharp({ create: { width: 24, height: 16, channels: 4, background: '#33669980' } })
      .png()
      .toBuffer();
    const answer = await post(
      base,
      '/v1/images/edits',
      { model: 'tiny-upscaler', prompt: 'upscale', image: [rgb.toString('base64'), rgba.toString('base64')] },
      { traceparent: traceparent(caller) },
    );
    expect(answer.status).toBe(200);
    const outputs = (answer.body.data as { b64_json: string }[]).map((d) => Buffer.from(d.b64_json, 'base64'));
    const spans = await receiver.waitFor(
      (received) => received.filter((s) => s.traceId === caller.traceId && s.name === 'image encode').length === 2,
    );
    const ofTrace = spans.filter((s) => s.traceId === caller.traceId);
    const request = ofTrace.find((s) => s.name === 'POST /v1/images/edits')!;
    const edit = ofTrace.find((s) => s.name === 'image edit tiny-upscaler')!;
    expect(ancestors(edit, spans)).toContain(request);
    expect(edit.attributes).toMatchObject({
      'gen_ai.request.model': 'tiny-upscaler',
      'onnx_gateway.image.task': 'super-resolution',
      'onnx_gateway.image.inputs': 2,
      'onnx_gateway.image.outputs': 2,
    });
    const children = (name: string) =>
      ofTrace
        .filter((s) => s.name === name && s.parentSpanId === edit.spanId)
        .sort(
          (a, b) =>
            Number(a.attributes['onnx_gateway.image.index'] ?? 0) -
            Number(b.attributes['onnx_gateway.image.index'] ?? 0),
        );
    expect(children('admission wait')).toHaveLength(1);
    const decodes = children('image decode');
    expect(decodes.map((s) => s.attributes)).toEqual([
      expect.objectContaining({
        'onnx_gateway.image.index': 0,
        'onnx_gateway.image.input_bytes': rgb.length,
        'onnx_gateway.image.width': 30,
        'onnx_gateway.image.height': 20,
        'onnx_gateway.image.alpha': false,
      }),
      expect.objectContaining({
        'onnx_gateway.image.index': 1,
        'onnx_gateway.image.input_bytes': rgba.length,
        'onnx_gateway.image.width': 24,
        'onnx_gateway.image.height': 16,
        'onnx_gateway.image.alpha': true,
      }),
    ]);
    // One model run per image (x2 super-resolution), its tiles and inference time.
    const runs = ofTrace.filter((s) => s.name === 'image run tiny-upscaler' && s.parentSpanId === edit.spanId);
    expect(
      runs
        .map((s) => [s.attributes['onnx_gateway.image.input_width'], s.attributes['onnx_gateway.image.width']])
        .sort(),
    ).toEqual([
      [24, 48],
      [30, 60],
    ]);
    for (const run of runs) expect(run.attributes['onnx_gateway.image.tiles']).toBeGreaterThan(0);
    expect(runs.reduce((sum, s) => sum + (s.attributes['onnx_gateway.image.tiles'] as number), 0)).toBe(
      edit.attributes['onnx_gateway.image.tiles'],
    );
    // One encode per output, its size the answer's.
    const encodes = children('image encode');
    expect(encodes.map((s) => s.attributes['onnx_gateway.image.output_bytes']).sort()).toEqual(
      outputs.map((bytes) => bytes.length).sort(),
    );
    expect(
      encodes.map((s) => [s.attributes['onnx_gateway.image.width'], s.attributes['onnx_gateway.image.height']]).sort(),
    ).toEqual([
      [48, 32],
      [60, 40],
    ]);
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

describe.skipIf(missing(hasRedisServer, REDIS_SKIP_REASON))(
  `tracing jobs across replicas through Redis${hasRedisServer ? '' : ` (skipped: ${REDIS_SKIP_REASON})`}`,
  () => {
    const key = 'tracing-replicas-key-0123456789';
    let receiver: OtlpReceiver;
    let dir: string;
    let redis: RedisServer;
    const standIns: StandInSearxng[] = [];
    const servers: ServerProcess[] = [];
    let baseA: string;

    beforeAll(async () => {
      receiver = await startOtlpReceiver();
      dir = await mkdtemp(join(tmpdir(), 'onnx-gateway-tracing-redis-'));
      const filesDir = join(dir, 'files');
      await mkdir(filesDir);
      redis = await startRedisServer(dir);
      // Each replica searches its own stand-in: which one saw a query says which replica ran the task.
      standIns.push(await startStandInSearxng(), await startStandInSearxng());
      const start = (name: string, searxng: StandInSearxng) => {
        const server = spawnTinyServer(join(dir, name), {
          ONNX_GATEWAY_API_KEYS: key,
          ONNX_GATEWAY_REDIS_URL: redis.url,
          ONNX_GATEWAY_FILES_DIR: filesDir,
          ONNX_GATEWAY_BATCH_CHUNK_LINES: '3',
          ONNX_GATEWAY_SEARCH_PROVIDER: 'searxng',
          ONNX_GATEWAY_SEARXNG_URL: searxng.url,
          ONNX_GATEWAY_SEARCH_CONCURRENCY: '1',
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
          OTEL_BSP_SCHEDULE_DELAY: '50',
          OTEL_RESOURCE_ATTRIBUTES: `service.instance.id=${name}`,
        });
        servers.push(server);
        return server;
      };
      [baseA] = await Promise.all([listeningUrl(start('a', standIns[0]!)), listeningUrl(start('b', standIns[1]!))]);
    }, 120_000);
    afterAll(async () => {
      for (const server of servers) if (server.child.exitCode === null) server.child.kill('SIGKILL');
      await Promise.all(standIns.map((standIn) => standIn.close()));
      await redis?.stop();
      await receiver?.close();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    async function call<T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
      const response = await fetch(`${baseA}/v1${path}`, {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          ...(body ? { 'content-type': 'application/json' } : {}),
          ...headers,
        },
        body: body ? JSON.stringify(body) : undefined,
      });
      expect(response.status, `${method} ${path}`).toBe(200);
      return (await response.json()) as T;
    }

    it('runs a search task created on one replica on the other, in the creating request trace', async () => {
      // Tasks created on replica a until one runs on replica b.
      let caller = callerTrace();
      let id = '';
      for (let i = 0; i < 20; i++) {
        caller = callerTrace();
        const query = `traced query ${i}`;
        id = (await call<{ id: string }>('POST', '/web-search/search', { query }, { traceparent: traceparent(caller) }))
          .id;
        expect((await call<{ state: string }>('GET', `/web-search/search/${id}?wait=30`)).state).toBe('succeeded');
        if (standIns[1]!.requests.some((request) => request.get('q') === query)) break;
        id = '';
      }
      expect(id, 'a task ran on replica b').not.toBe('');

      // Each replica exports its spans on its own schedule: wait for both sides' spans.
      const needed = ['POST /v1/web-search/search', 'send search', 'process search', 'search task', 'search searxng'];
      const spans = await receiver.waitFor((received) =>
        needed.every((name) => received.some((s) => s.traceId === caller.traceId && s.name === name)),
      );
      const ofTrace = spans.filter((s) => s.traceId === caller.traceId);
      const request = ofTrace.find((s) => s.name === 'POST /v1/web-search/search')!;
      expect(request.resource['service.instance.id']).toBe('a');
      // The producer span, on replica a, under the request that created the task.
      const send = ofTrace.find((s) => s.name === 'send search')!;
      expect(send.kind).toBe(producerKind);
      expect(ancestors(send, spans)).toContain(request);
      expect(send.resource['service.instance.id']).toBe('a');
      expect(send.attributes).toMatchObject({
        'messaging.system': 'bullmq',
        'messaging.operation.type': 'send',
        'messaging.destination.name': 'search',
        'messaging.message.id': id,
      });
      // The consumer span, on replica b, a child of the producer span and linked to it.
      const process = ofTrace.find((s) => s.name === 'process search')!;
      expect(process.kind).toBe(consumerKind);
      expect(process.resource['service.instance.id']).toBe('b');
      expect(process.parentSpanId).toBe(send.spanId);
      expect(process.links).toEqual([{ traceId: caller.traceId, spanId: send.spanId }]);
      expect(process.attributes).toMatchObject({ 'messaging.operation.type': 'process', 'messaging.message.id': id });
      // The task's run and its provider call under it.
      const task = ofTrace.find((s) => s.name === 'search task')!;
      expect(task.parentSpanId).toBe(process.spanId);
      expect(ofTrace.find((s) => s.name === 'search searxng')!.parentSpanId).toBe(task.spanId);
    });

    it("runs a batch's jobs, on either replica, in the trace of the request that created it", async () => {
      const caller = callerTrace();
      const { fileId } = await uploadEmbeddingRequests(baseA, key, 7);
      const created = await call<{ id: string }>(
        'POST',
        '/batches',
        { input_file_id: fileId, endpoint: '/v1/embeddings', completion_window: '24h' },
        { traceparent: traceparent(caller) },
      );
      for (;;) {
        const batch = await call<{ status: string }>('GET', `/batches/${created.id}`);
        if (['completed', 'failed', 'cancelled', 'expired'].includes(batch.status)) {
          expect(batch.status).toBe('completed');
          break;
        }
        await sleep(50);
      }
      const processed = (received: ReceivedSpan[], job: string) =>
        received.filter(
          (s) =>
            s.traceId === caller.traceId &&
            s.name === 'process batch-chunks' &&
            s.attributes['onnx_gateway.batch.job'] === job,
        );
      // Each replica exports its spans on its own schedule: wait for every job's and request's span.
      const spans = await receiver.waitFor(
        (received) =>
          processed(received, 'finalize').length === 1 &&
          processed(received, 'validate').length === 1 &&
          processed(received, 'chunk').length === 3 &&
          received.filter((s) => s.traceId === caller.traceId && s.name === 'embeddings tiny-embedder').length === 7 &&
          received.filter((s) => s.traceId === caller.traceId && s.name === 'send batch-chunks').length === 3 &&
          received.some((s) => s.traceId === caller.traceId && s.name === 'POST /v1/batches'),
      );
      const ofTrace = spans.filter((s) => s.traceId === caller.traceId);
      const request = ofTrace.find((s) => s.name === 'POST /v1/batches')!;
      const sends = ofTrace.filter((s) => s.name === 'send batch-chunks');
      for (const send of sends) expect(send.kind).toBe(producerKind);
      // validate: queued by the request; its run queues the 3 chunks (7 requests, 3 a chunk) at once.
      const [validate] = processed(spans, 'validate');
      const validateSend = sends.find((s) => s.spanId === validate!.parentSpanId)!;
      expect(ancestors(validateSend, spans)).toContain(request);
      const chunks = processed(spans, 'chunk');
      expect(chunks.map((s) => s.attributes['onnx_gateway.batch.chunk']).sort()).toEqual([0, 1, 2]);
      const chunkSend = sends.find((s) => s.attributes['onnx_gateway.batch.job'] === 'chunk')!;
      expect(chunkSend.parentSpanId).toBe(validate!.spanId);
      expect(chunkSend.attributes['messaging.batch.message_count']).toBe(3);
      for (const chunk of chunks) {
        expect(chunk.kind).toBe(consumerKind);
        expect(chunk.parentSpanId).toBe(chunkSend.spanId);
        expect(chunk.links).toEqual([{ traceId: caller.traceId, spanId: chunkSend.spanId }]);
        expect(chunk.attributes['onnx_gateway.batch.id']).toBe(created.id);
      }
      // Each chunk's requests are embeddings operations under its run.
      const operations = ofTrace.filter((s) => s.name === 'embeddings tiny-embedder');
      expect(operations).toHaveLength(7);
      for (const operation of operations) expect(chunks).toContainEqual(ancestors(operation, spans)[0]);
      // The last chunk to finish queued the finalize job.
      const [finalize] = processed(spans, 'finalize');
      const finalizeSend = sends.find((s) => s.spanId === finalize!.parentSpanId)!;
      expect(chunks.map((s) => s.spanId)).toContain(finalizeSend.parentSpanId);
    });
  },
);
