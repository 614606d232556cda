/**
 * GET /metrics: Prometheus text with request counts, latencies, request phases, batches, tokens,
 * queues, workers and model load times, from a registry of the server's own.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metrics } from '../../src/http/metrics.js';
import { formatServerTiming, parseServerTiming } from '../../src/http/timing.js';
import type { Server } from '../../src/main.js';
import type { EmbeddingList } from '../helpers/bodies.js';
import { auth, startServer } from '../helpers/server.js';

/** Parses Prometheus text into `name{labels}` -> value (labels as written, in order). */
function parse(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    samples.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return samples;
}

/** The value of one sample, by metric name and a subset of its labels. */
function sample(samples: Map<string, number>, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const [key, value] of samples) {
    const match = /^([^{]+)(?:\{(.*)\})?$/.exec(key)!;
    if (match[1] !== name) continue;
    const have = new Map([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([k, v]) => have.get(k) === v)) return value;
  }
  return undefined;
}

async function scrape(server: Server): Promise<Map<string, number>> {
  const res = await server.app.inject({ method: 'GET', url: '/metrics' });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
  return parse(res.body);
}

describe('GET /metrics', () => {
  let server: Server;
  const texts = [
    'a short text',
    'a somewhat longer text than the first one is',
    'x',
    'the quick brown fox jumps over the lazy dog',
  ];
  let promptTokens = 0;
  let inputs = 0;
  let samples: Map<string, number>;

  beforeAll(async () => {
    server = await startServer();
    const post = (url: string, payload: object) => server.app.inject({ method: 'POST', url, payload, headers: auth });
    for (let i = 0; i < 3; i++) {
      const res = await post('/v1/embeddings', { model: 'tiny-embedder', input: texts.slice(i) });
      expect(res.statusCode).toBe(200);
      promptTokens += res.json<EmbeddingList>().usage.prompt_tokens;
      inputs += texts.length - i;
    }
    expect((await post('/v1/embeddings', { input: 'x', dimensions: 1000 })).statusCode).toBe(400);
    expect((await post('/v1/rerank', { query: 'q', documents: ['one', 'two'] })).statusCode).toBe(200);
    expect((await server.app.inject({ method: 'GET', url: '/v1/models/nope', headers: auth })).statusCode).toBe(404);
    expect((await server.app.inject({ method: 'GET', url: '/no/such/route' })).statusCode).toBe(404);
    samples = await scrape(server);
  });
  afterAll(() => server?.close());

  it('counts requests by route pattern, method and status', () => {
    expect(
      sample(samples, 'onnx_gateway_http_requests_total', { method: 'POST', route: '/v1/embeddings', status: '200' }),
    ).toBe(3);
    expect(
      sample(samples, 'onnx_gateway_http_requests_total', { method: 'POST', route: '/v1/embeddings', status: '400' }),
    ).toBe(1);
    expect(
      sample(samples, 'onnx_gateway_http_requests_total', { method: 'POST', route: '/v1/rerank', status: '200' }),
    ).toBe(1);
    // The pattern, not the URL: ids do not become labels.
    expect(
      sample(samples, 'onnx_gateway_http_requests_total', { method: 'GET', route: '/v1/models/:model', status: '404' }),
    ).toBe(1);
    expect(
      sample(samples, 'onnx_gateway_http_requests_total', { method: 'GET', route: 'unmatched', status: '404' }),
    ).toBe(1);
    expect([...samples.keys()].some((key) => key.includes('/v1/models/nope') || key.includes('/no/such/route'))).toBe(
      false,
    );
  });

  it('keeps latency histograms per route', () => {
    expect(
      sample(samples, 'onnx_gateway_http_request_duration_seconds_count', { method: 'POST', route: '/v1/embeddings' }),
    ).toBe(4);
    expect(
      sample(samples, 'onnx_gateway_http_request_duration_seconds_bucket', {
        method: 'POST',
        route: '/v1/embeddings',
        le: '+Inf',
      }),
    ).toBe(4);
    expect(
      sample(samples, 'onnx_gateway_http_request_duration_seconds_sum', { method: 'POST', route: '/v1/embeddings' }),
    ).toBeGreaterThan(0);
  });

  it('records the tokenize, queue and inference phases of each answered model request', () => {
    for (const phase of ['tokenize', 'queue', 'inference']) {
      expect(sample(samples, 'onnx_gateway_request_phase_seconds_count', { route: '/v1/embeddings', phase })).toBe(3);
      expect(sample(samples, 'onnx_gateway_request_phase_seconds_count', { route: '/v1/rerank', phase })).toBe(1);
    }
    expect(
      sample(samples, 'onnx_gateway_request_phase_seconds_sum', { route: '/v1/embeddings', phase: 'inference' }),
    ).toBeGreaterThan(0);
  });

  it('counts exactly the tokens the responses report, and every input in a batch', () => {
    expect(sample(samples, 'onnx_gateway_tokens_total', { model: 'tiny-embedder' })).toBe(promptTokens);
    expect(sample(samples, 'onnx_gateway_batch_size_sum', { model: 'tiny-embedder' })).toBe(inputs);
    expect(sample(samples, 'onnx_gateway_batch_size_sum', { model: 'tiny-reranker' })).toBe(2);
    const batches = sample(samples, 'onnx_gateway_batch_size_count', { model: 'tiny-embedder' })!;
    expect(batches).toBeGreaterThanOrEqual(3);
    expect(sample(samples, 'onnx_gateway_inference_seconds_count', { model: 'tiny-embedder' })).toBe(batches);
  });

  it('measures batch fill as real over padded tokens', () => {
    const padded = sample(samples, 'onnx_gateway_padded_tokens_total', { model: 'tiny-embedder' })!;
    expect(padded).toBeGreaterThanOrEqual(promptTokens);
    const batches = sample(samples, 'onnx_gateway_batch_fill_ratio_count', { model: 'tiny-embedder' })!;
    const mean = sample(samples, 'onnx_gateway_batch_fill_ratio_sum', { model: 'tiny-embedder' })! / batches;
    expect(mean).toBeGreaterThan(0);
    expect(mean).toBeLessThanOrEqual(1);
    // The scheduler never forms a batch under 80% fill.
    expect(sample(samples, 'onnx_gateway_batch_fill_ratio_bucket', { model: 'tiny-embedder', le: '0.7' })).toBe(0);
  });

  it('reports queues, workers, readiness and model load times', () => {
    expect(sample(samples, 'onnx_gateway_queue_depth', { model: 'tiny-embedder' })).toBe(0);
    expect(sample(samples, 'onnx_gateway_queue_depth', { model: 'tiny-reranker' })).toBe(0);
    expect(sample(samples, 'onnx_gateway_batches_in_flight')).toBe(0);
    expect(sample(samples, 'onnx_gateway_worker_restarts_total')).toBe(0);
    expect(sample(samples, 'onnx_gateway_ready')).toBe(1);
    expect(sample(samples, 'onnx_gateway_model_load_seconds', { model: 'tiny-embedder' })).toBeGreaterThan(0);
    expect(sample(samples, 'onnx_gateway_model_load_seconds', { model: 'tiny-reranker' })).toBeGreaterThan(0);
  });

  it('includes the process metrics', () => {
    expect(sample(samples, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(sample(samples, 'nodejs_eventloop_lag_seconds')).toBeDefined();
  });

  it('is public, like /health', async () => {
    const res = await server.app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
  });

  it('keeps the counts of each server apart', async () => {
    const other = await startServer();
    try {
      await other.app.inject({ method: 'POST', url: '/v1/embeddings', payload: { input: 'one' }, headers: auth });
      const mine = await scrape(other);
      expect(
        sample(mine, 'onnx_gateway_http_requests_total', { method: 'POST', route: '/v1/embeddings', status: '200' }),
      ).toBe(1);
      expect(sample(mine, 'onnx_gateway_batch_size_sum', { model: 'tiny-embedder' })).toBe(1);
      const first = await scrape(server);
      expect(
        sample(first, 'onnx_gateway_http_requests_total', { method: 'POST', route: '/v1/embeddings', status: '200' }),
      ).toBe(3);
    } finally {
      await other.close();
    }
  });
});

describe('Server-Timing', () => {
  it('is written from the phases a route reports and read back as them', () => {
    const edit = { decode: 1, edit: 20.5, inference: 18.25, encode: 0.125 };
    expect(formatServerTiming(edit)).toBe('decode;dur=1.00, edit;dur=20.50, inference;dur=18.25, encode;dur=0.13');
    expect(parseServerTiming('tokenize;dur=1.5, queue;dur=0.25, inference;dur=12, cache;desc="other"')).toEqual({
      tokenize: 1.5,
      queue: 0.25,
      inference: 12,
    });
  });

  it('tells where the time of an embeddings and a rerank request went', async () => {
    const server = await startServer();
    try {
      for (const [url, payload] of [
        ['/v1/embeddings', { input: 'time me' }],
        ['/v1/rerank', { query: 'q', documents: ['d'] }],
      ] as const) {
        const res = await server.app.inject({ method: 'POST', url, payload, headers: auth });
        expect(res.statusCode).toBe(200);
        expect(res.headers['server-timing']).toMatch(/^tokenize;dur=[\d.]+, queue;dur=[\d.]+, inference;dur=[\d.]+$/);
      }
    } finally {
      await server.close();
    }
  });
});

describe('Metrics', () => {
  it('reads queue depth, in-flight batches, restarts and readiness from the engine when scraped', async () => {
    const metrics = new Metrics();
    const state = { depth: 7, inFlight: 2, restarts: 0, ready: false, resident: 0 };
    metrics.watch({
      models: () => ['m'],
      queueDepth: () => state.depth,
      batchesInFlight: () => state.inFlight,
      workerRestarts: () => state.restarts,
      ready: () => state.ready,
      residentBytes: () => state.resident,
    });
    let samples = parse(await metrics.registry.metrics());
    expect(sample(samples, 'onnx_gateway_queue_depth', { model: 'm' })).toBe(7);
    expect(sample(samples, 'onnx_gateway_model_resident_bytes', { model: 'm' })).toBe(0);
    expect(sample(samples, 'onnx_gateway_batches_in_flight')).toBe(2);
    expect(sample(samples, 'onnx_gateway_ready')).toBe(0);
    // Series exist before the first batch, so rates and ratios start at zero rather than missing.
    expect(sample(samples, 'onnx_gateway_tokens_total', { model: 'm' })).toBe(0);
    expect(sample(samples, 'onnx_gateway_batch_size_count', { model: 'm' })).toBe(0);

    Object.assign(state, { depth: 0, inFlight: 0, restarts: 2, ready: true, resident: 95_000_000 });
    metrics.onBatch('m', { size: 4, tokens: 30, paddedTokens: 40, inferenceMs: 12, device: 'cpu' });
    metrics.onBatch('g', { size: 2, tokens: 20, paddedTokens: 20, inferenceMs: 8, device: 'webgpu' });
    metrics.onLoad('m', { seconds: 1.5 });
    metrics.onUnload('m');
    metrics.onLoad('m', { seconds: 0.5 });
    samples = parse(await metrics.registry.metrics());
    expect(sample(samples, 'onnx_gateway_model_resident_bytes', { model: 'm' })).toBe(95_000_000);
    expect(sample(samples, 'onnx_gateway_model_loads_total', { model: 'm' })).toBe(2);
    expect(sample(samples, 'onnx_gateway_model_unloads_total', { model: 'm' })).toBe(1);
    expect(sample(samples, 'onnx_gateway_model_load_seconds', { model: 'm' })).toBe(0.5);
    expect(sample(samples, 'onnx_gateway_worker_restarts_total')).toBe(2);
    expect(sample(samples, 'onnx_gateway_ready')).toBe(1);
    expect(sample(samples, 'onnx_gateway_batch_fill_ratio_sum', { model: 'm' })).toBe(0.75);
    expect(sample(samples, 'onnx_gateway_inference_seconds_sum', { model: 'm' })).toBe(0.012);
    // The same batches by the device they ran on.
    expect(sample(samples, 'onnx_gateway_device_batches_total', { device: 'cpu' })).toBe(1);
    expect(sample(samples, 'onnx_gateway_device_batches_total', { device: 'webgpu' })).toBe(1);
    expect(sample(samples, 'onnx_gateway_device_inference_seconds_sum', { device: 'webgpu' })).toBe(0.008);
    expect(sample(samples, 'onnx_gateway_padded_tokens_total', { model: 'm' })).toBe(40);

    // A counter read from the pool never goes back, and counts each restart once.
    state.restarts = 3;
    samples = parse(await metrics.registry.metrics());
    expect(sample(samples, 'onnx_gateway_worker_restarts_total')).toBe(3);
  });
});
