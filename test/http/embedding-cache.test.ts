/**
 * The embedding cache through the routes: a server with it answers byte for byte as a server
 * without it (float and base64, cut dimensions, normalisation on and off, OpenAI, TEI and Ollama
 * routes), says in `x-cache-hits` how many inputs were hits, never hits across models, variants
 * or prompts, and counts in /metrics. Two servers share entries through a real Redis, and keep
 * answering when it stops answering.
 */
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Server } from '../../src/main.js';
import { planInt8, quantizeToInt8 } from '../../src/quantize/int8-variant.js';
import { hasRedisServer, REDIS_SKIP_REASON, startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { missing } from '../helpers/resources.js';
import { auth, startServer } from '../helpers/server.js';

const models = ['tiny-embedder', 'tiny-embedder:int8', 'tiny-embedder-sentence', 'tiny-reranker'];
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'onnx-gateway-cache-'));
  for (const folder of ['tiny-embedder', 'tiny-embedder-sentence', 'tiny-reranker'])
    await cp(join(inject('tinyModelsDir'), folder), join(dir, folder), { recursive: true });
  // Query and document prompts, so that input_type changes what the model is fed.
  await writeFile(
    join(dir, 'tiny-embedder', 'config_sentence_transformers.json'),
    JSON.stringify({ prompts: { query: 'query: ', document: 'passage: ' } }),
  );
  await quantizeToInt8(planInt8('tiny-embedder', dir));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

async function post(server: Server, url: string, payload: object) {
  const res = await server.app.inject({ method: 'POST', url, headers: auth, payload });
  expect(res.statusCode, res.body).toBe(200);
  // Ollama's answer says how long it took: the one part that may differ.
  const body = res.body.replace(/"total_duration":\d+/, '"total_duration":0');
  return { body, hits: res.headers['x-cache-hits'] as string | undefined };
}

/** `name{labels} value` lines of /metrics, by name and exact label text. */
async function scrape(server: Server): Promise<Map<string, number>> {
  const res = await server.app.inject({ method: 'GET', url: '/metrics' });
  const samples = new Map<string, number>();
  for (const line of res.body.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    samples.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return samples;
}

const texts = [
  'the quick brown fox',
  'jumps over the lazy dog',
  'password reset',
  'a question about the model and its answer',
];

describe('embedding cache', () => {
  let cached: Server;
  let plain: Server;
  beforeAll(async () => {
    [cached, plain] = await Promise.all([
      startServer({ modelsDir: dir, models, workers: 1, cacheMaxMb: 16 }),
      startServer({ modelsDir: dir, models, workers: 1, cacheMaxMb: 0 }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([cached?.close(), plain?.close()]);
  });

  // Each request runs twice on the cached server (a miss, then a hit) and once on the plain one.
  const requests: [route: string, payload: object][] = [
    ['/v1/embeddings', { model: 'tiny-embedder', input: texts }],
    ['/v1/embeddings', { model: 'tiny-embedder', input: texts, encoding_format: 'base64' }],
    ['/v1/embeddings', { model: 'tiny-embedder', input: texts, encoding_format: 'base64', dimensions: 8 }],
    ['/v1/embeddings', { model: 'tiny-embedder', input: texts, input_type: 'query', encoding_format: 'base64' }],
    ['/v1/engines/tiny-embedder/embeddings', { input: [texts[1], texts[0]], encoding_format: 'base64' }],
    ['/embed', { inputs: texts, normalize: false }],
    ['/embed', { inputs: texts, normalize: true, dimensions: 16 }],
    ['/api/embed', { model: 'tiny-embedder', input: texts }],
    ['/api/embeddings', { model: 'tiny-embedder', prompt: texts[2] }],
    ['/v1/embeddings', { model: 'tiny-embedder:int8', input: texts, encoding_format: 'base64' }],
  ];

  it('answers byte for byte as a server without it, on a miss and on a hit', async () => {
    for (const [route, payload] of requests) {
      const expected = await post(plain, route, payload);
      const miss = await post(cached, route, payload);
      const hit = await post(cached, route, payload);
      expect(miss.body, `${route} ${JSON.stringify(payload)}`).toBe(expected.body);
      expect(hit.body, `${route} ${JSON.stringify(payload)}`).toBe(expected.body);
      expect(expected.hits).toBeUndefined();
      expect(Number(hit.hits)).toBeGreaterThan(0);
    }
  });

  it('mixes hits and computed inputs in input order, and counts the hits in x-cache-hits', async () => {
    const fresh = ['an input never sent before', 'another new one'];
    const input = [fresh[0], texts[3], fresh[1], texts[0], fresh[0]];
    const payload = { model: 'tiny-embedder', input, encoding_format: 'base64' };
    const expected = await post(plain, '/v1/embeddings', payload);
    const mixed = await post(cached, '/v1/embeddings', payload);
    expect(mixed.body).toBe(expected.body);
    expect(mixed.hits).toBe('2');
    expect((await post(cached, '/v1/embeddings', payload)).hits).toBe('5');
  });

  it('never hits across models, variants or prompts', async () => {
    const text = 'only ever sent in this test';
    const hits = async (payload: object) => (await post(cached, '/v1/embeddings', { input: [text], ...payload })).hits;
    expect(await hits({ model: 'tiny-embedder' })).toBe('0');
    // The same weights behind another served model, the int8 variant, and each prompt.
    expect(await hits({ model: 'tiny-embedder-sentence' })).toBe('0');
    expect(await hits({ model: 'tiny-embedder:int8' })).toBe('0');
    expect(await hits({ model: 'tiny-embedder', input_type: 'query' })).toBe('0');
    expect(await hits({ model: 'tiny-embedder', input_type: 'document' })).toBe('0');
    // Each of them is a hit the second time.
    for (const payload of [
      { model: 'tiny-embedder' },
      { model: 'tiny-embedder-sentence' },
      { model: 'tiny-embedder:int8' },
      { model: 'tiny-embedder', input_type: 'query' },
    ]) {
      expect(await hits(payload)).toBe('1');
    }
  });

  it('counts hits, misses, entries and bytes in /metrics', async () => {
    const before = await scrape(cached);
    const input = ['counted once', 'counted twice'];
    await post(cached, '/v1/embeddings', { model: 'tiny-embedder', input });
    await post(cached, '/v1/embeddings', { model: 'tiny-embedder', input: [...input, 'counted twice'] });
    const after = await scrape(cached);
    const delta = (name: string) => after.get(name)! - (before.get(name) ?? 0);
    expect(delta('onnx_gateway_embedding_cache_misses_total')).toBe(2);
    expect(delta('onnx_gateway_embedding_cache_hits_total{tier="local"}')).toBe(3);
    expect(delta('onnx_gateway_embedding_cache_entries')).toBe(2);
    expect(delta('onnx_gateway_embedding_cache_bytes')).toBeGreaterThan(2 * 32 * 4);
    expect(after.get('onnx_gateway_embedding_cache_evictions_total')).toBe(0);
    expect(after.get('onnx_gateway_embedding_cache_hits_total{tier="shared"}')).toBe(0);
    expect([...(await scrape(plain)).keys()].some((key) => key.includes('embedding_cache'))).toBe(false);
  });
});

describe.skipIf(missing(hasRedisServer, REDIS_SKIP_REASON))(
  `embedding cache shared through Redis${hasRedisServer ? '' : ` (skipped: ${REDIS_SKIP_REASON})`}`,
  () => {
    let redis: RedisServer;
    let one: Server;
    let two: Server;
    beforeAll(async () => {
      redis = await startRedisServer(dir);
      const shared = {
        modelsDir: dir,
        models: ['tiny-embedder', 'tiny-reranker'],
        workers: 1,
        cacheMaxMb: 16,
        cacheShared: true,
        cacheTtl: 3600,
        redisUrl: redis.url,
      };
      [one, two] = await Promise.all([startServer(shared), startServer(shared)]);
    });
    afterAll(async () => {
      await Promise.all([one?.close(), two?.close()]);
      await redis?.stop();
    });

    it('serves on one replica what another computed, byte for byte', async () => {
      const payload = {
        model: 'tiny-embedder',
        input: ['shared between replicas', 'and this one too'],
        encoding_format: 'base64',
      };
      const computed = await post(one, '/v1/embeddings', payload);
      expect(computed.hits).toBe('0');
      // The store is not awaited by the request: wait until it is in Redis.
      const client = new Redis(redis.url);
      try {
        for (let i = 0; i < 100 && (await client.keys('onnx-gateway:embedding:*')).length < 2; i++) await sleep(20);
        const values = await client.mgetBuffer(...(await client.keys('onnx-gateway:embedding:*')));
        // Pooled vectors of the tiny model's width, as float32 bytes.
        expect(values.map((value) => value?.byteLength)).toEqual([32 * 4, 32 * 4]);
        expect(await client.ttl((await client.keys('onnx-gateway:embedding:*'))[0]!)).toBeGreaterThan(3000);
      } finally {
        client.disconnect();
      }
      const fromRedis = await post(two, '/v1/embeddings', payload);
      expect(fromRedis.hits).toBe('2');
      expect(fromRedis.body).toBe(computed.body);
      expect((await scrape(two)).get('onnx_gateway_embedding_cache_hits_total{tier="shared"}')).toBe(2);
    });

    it('keeps answering when Redis stops answering, computing what it lacks', async () => {
      const client = new Redis(redis.url);
      // Every other client's commands wait 2.5 s: longer than a lookup may take.
      await client.call('CLIENT', 'PAUSE', '2500', 'ALL');
      client.disconnect();
      const payload = { model: 'tiny-embedder', input: ['sent while Redis is paused'] };
      expect((await post(one, '/v1/embeddings', payload)).hits).toBe('0');
      expect((await post(one, '/v1/embeddings', payload)).hits).toBe('1');
      expect((await scrape(one)).get('onnx_gateway_embedding_cache_shared_errors_total')).toBeGreaterThan(0);
    });
  },
);
