/**
 * The embedding cache on its own: the byte-bounded LRU, what a key depends on, which inputs reach
 * the engine, and the model identity the registry gives it (changing with the model's files).
 */
import { cp, mkdtemp, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createEmbeddingCache, EmbeddingCache } from '../../src/core/cache/embedding-cache.js';
import { entryOverheadBytes, VectorLru } from '../../src/core/cache/lru.js';
import { SharedTier } from '../../src/core/cache/shared-tier.js';
import type { JobResult } from '../../src/engine/scheduler.js';
import { loadCatalogue } from '../../src/models/catalogue.js';
import { LOCK_FILE, type ModelLock } from '../../src/models/lock.js';
import { loadServedModel, type ServedModel } from '../../src/models/registry.js';
import { freePort } from '../helpers/redis-server.js';

const width = 4;

/** What the cache reads of a served model. */
function model(overrides: Partial<ServedModel> = {}): ServedModel {
  return {
    id: 'm',
    baseId: 'm',
    variant: 'fp32',
    pooling: 'mean',
    output: { name: 'last_hidden_state', pooled: false, type: 'float32' },
    filesId: 'digest:one',
    dimensions: width,
    ...overrides,
  } as ServedModel;
}

/** An engine that answers each input with a row drawn from its ids, and records what it was given. */
function engine() {
  const calls: number[][][] = [];
  const compute = (sequences: Int32Array[]): Promise<JobResult> => {
    calls.push(sequences.map((ids) => [...ids]));
    const output = new Float32Array(sequences.length * width);
    sequences.forEach((ids, row) => {
      for (let d = 0; d < width; d++) output[row * width + d] = ids[0]! * 10 + d + ids.length / 100;
    });
    return Promise.resolve({ output, width, queueMs: 1, loadMs: 0, inferenceMs: 2, batches: 1 });
  };
  return { calls, compute };
}

const ids = (...values: number[]) => Int32Array.from(values);

describe('VectorLru', () => {
  const vector = () => new Float32Array(width);
  const cost = (key: string) => width * 4 + key.length * 2 + entryOverheadBytes;

  it('evicts the least recently used entries to stay within its bytes', () => {
    const lru = new VectorLru(cost('a') * 2);
    lru.set('a', vector());
    lru.set('b', vector());
    expect(lru.get('a')).toBeDefined(); // a is now the most recent
    lru.set('c', vector());
    expect(lru.get('b')).toBeUndefined();
    expect(lru.get('a')).toBeDefined();
    expect(lru.get('c')).toBeDefined();
    expect(lru.evictions).toBe(1);
    expect(lru.size).toBe(2);
    expect(lru.bytes).toBe(cost('a') * 2);
  });

  it('keeps nothing larger than its bound, and counts a replaced entry once', () => {
    const lru = new VectorLru(cost('a'));
    lru.set('a', vector());
    lru.set('a', vector());
    expect(lru.bytes).toBe(cost('a'));
    lru.set('big', new Float32Array(1024));
    expect(lru.get('big')).toBeUndefined();
    expect(lru.get('a')).toBeDefined();
  });
});

describe('EmbeddingCache', () => {
  it('sends only the inputs it lacks to the engine, once each, and answers in input order', async () => {
    const cache = new EmbeddingCache(1 << 20);
    const { calls, compute } = engine();
    const first = await cache.run(model(), [ids(1, 2), ids(3)], compute);
    expect(first.hits).toBe(0);
    const second = await cache.run(model(), [ids(3), ids(5), ids(1, 2), ids(5)], compute);
    expect(calls).toEqual([[[1, 2], [3]], [[5]]]);
    expect(second.hits).toBe(2);
    const expected = await engine().compute([ids(3), ids(5), ids(1, 2), ids(5)]);
    expect(second.output).toEqual(expected.output);
    expect(cache.stats()).toMatchObject({ hits: 2, misses: 3, entries: 3, evictions: 0 });
  });

  it('lets a request wait for an input another request is computing, and compute it when that one fails', async () => {
    const cache = new EmbeddingCache(1 << 20);
    const { calls, compute } = engine();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const slow = async (sequences: Int32Array[]) => {
      await gate;
      return compute(sequences);
    };
    const first = cache.run(model(), [ids(8), ids(9)], slow);
    const second = cache.run(model(), [ids(9), ids(10)], compute);
    release();
    const [a, b] = await Promise.all([first, second]);
    // 9 was computed once, by the first request; the second computed only 10.
    expect(calls).toEqual([[[10]], [[8], [9]]]);
    expect(b.hits).toBe(1);
    expect(b.output.subarray(0, width)).toEqual(a.output.subarray(width));

    const failing = new Promise<JobResult>((_, reject) => setTimeout(() => reject(new Error('cancelled')), 10));
    const third = cache.run(model(), [ids(11)], () => failing);
    const fourth = cache.run(model(), [ids(11)], compute);
    await expect(third).rejects.toThrow('cancelled');
    expect((await fourth).hits).toBe(0);
    expect(calls.at(-1)).toEqual([[11]]);
  });

  it('keeps rows as the engine returned them: answers may be changed in place by the caller', async () => {
    const cache = new EmbeddingCache(1 << 20);
    const { compute } = engine();
    const first = await cache.run(model(), [ids(7)], compute);
    const pristine = first.output.slice();
    first.output.fill(0);
    const again = await cache.run(model(), [ids(7)], compute);
    again.output.fill(0);
    expect((await cache.run(model(), [ids(7)], compute)).output).toEqual(pristine);
  });

  it('keys by the model, its variant, pooling, output and files, and by the exact ids', () => {
    const cache = new EmbeddingCache(1 << 20);
    const base = cache.keyOf(model(), ids(1, 2, 3));
    expect(cache.keyOf(model(), ids(1, 2, 3))).toBe(base);
    // A view of the same ids in a larger buffer is the same input.
    expect(cache.keyOf(model(), ids(9, 1, 2, 3, 9).subarray(1, 4))).toBe(base);
    const others = [
      cache.keyOf(model(), ids(1, 2)),
      cache.keyOf(model(), ids(1, 2, 4)),
      cache.keyOf(model({ baseId: 'other' }), ids(1, 2, 3)),
      cache.keyOf(model({ variant: 'int8' }), ids(1, 2, 3)),
      cache.keyOf(model({ pooling: 'cls' }), ids(1, 2, 3)),
      cache.keyOf(model({ output: { name: 'sentence_embedding', pooled: true, type: 'float32' } }), ids(1, 2, 3)),
      cache.keyOf(model({ filesId: 'digest:two' }), ids(1, 2, 3)),
    ];
    expect(new Set([base, ...others]).size).toBe(others.length + 1);
  });

  it('gives no hit across models, variants or versions of the files', async () => {
    const cache = new EmbeddingCache(1 << 20);
    const { calls, compute } = engine();
    for (const m of [
      model(),
      model({ variant: 'int8' }),
      model({ baseId: 'other' }),
      model({ filesId: 'digest:two' }),
    ]) {
      expect((await cache.run(m, [ids(4, 4)], compute)).hits).toBe(0);
    }
    expect(calls).toHaveLength(4);
  });

  it('evicts at a tiny byte bound and counts it', async () => {
    // Keys of one model have one length: two entries fit, a third evicts.
    const oneEntry = width * 4 + new EmbeddingCache(1).keyOf(model(), ids(1)).length * 2 + entryOverheadBytes;
    const small = new EmbeddingCache(oneEntry * 2);
    const { calls, compute } = engine();
    await small.run(model(), [ids(1), ids(2), ids(3)], compute);
    expect(small.stats()).toMatchObject({ entries: 2, evictions: 1, bytes: oneEntry * 2 });
    // 1 was evicted, 2 and 3 stay.
    expect((await small.run(model(), [ids(2), ids(3)], compute)).hits).toBe(2);
    expect((await small.run(model(), [ids(1)], compute)).hits).toBe(0);
    expect(calls.at(-1)).toEqual([[1]]);
  });
});

describe('settings', () => {
  it('turns the cache off at 0 MB, and refuses a shared cache without a Redis URL', () => {
    const log = { warn: () => undefined, info: () => undefined };
    expect(createEmbeddingCache(loadConfig({ cacheMaxMb: 0 }, {}), log)).toBeUndefined();
    expect(createEmbeddingCache(loadConfig({}, {}), log)).toBeInstanceOf(EmbeddingCache);
    expect(() => loadConfig({ cacheShared: true }, {})).toThrow(/redisUrl/);
    expect(() => loadConfig({}, { ONNX_GATEWAY_CACHE_MAX_MB: '-1' })).toThrow(/cacheMaxMb/);
  });
});

describe('the shared tier', () => {
  it('answers misses at once while Redis is unreachable, logs the outage once and counts the failures', async () => {
    const warnings: string[] = [];
    const tier = new SharedTier(`redis://127.0.0.1:${await freePort()}`, 60, {
      warn: (message) => warnings.push(message),
      info: () => undefined,
    });
    try {
      const cache = new EmbeddingCache(1 << 20, tier);
      const { calls, compute } = engine();
      const started = performance.now();
      for (let i = 0; i < 3; i++) expect((await cache.run(model(), [ids(i + 1)], compute)).hits).toBe(0);
      expect(performance.now() - started).toBeLessThan(5000);
      expect(calls).toHaveLength(3);
      expect(tier.errors).toBeGreaterThanOrEqual(3);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/Redis is failing/);
    } finally {
      await tier.close();
    }
  });
});

describe('the model identity in the key', () => {
  let dir: string;
  const catalogue = loadCatalogue(null);
  const graph = () => join(dir, 'tiny-embedder', 'onnx', 'model.onnx');
  const load = () => loadServedModel('tiny-embedder', dir, catalogue);
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'onnx-gateway-cache-'));
    await cp(join(inject('tinyModelsDir'), 'tiny-embedder'), join(dir, 'tiny-embedder'), { recursive: true });
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('changes when the graph file is rewritten (no lock: path, size, modification time)', async () => {
    const before = await load();
    await utimes(graph(), new Date(), new Date(Date.now() + 60_000));
    const after = await load();
    expect(after.filesId).not.toBe(before.filesId);
    const cache = new EmbeddingCache(1 << 20);
    expect(cache.keyOf(after, ids(101, 5, 102))).not.toBe(cache.keyOf(before, ids(101, 5, 102)));
  });

  it('follows the lock when it lists the graph: the same wherever the files sit, new with a new commit', async () => {
    const lock = (commit: string): ModelLock => ({
      version: 1,
      repo: 'owner/tiny',
      revision: 'main',
      commit,
      variants: { fp32: 'onnx/model.onnx' },
      files: [{ path: 'onnx/model.onnx', size: 1, sha256: 'ab'.repeat(32) }],
      pulledAt: new Date().toISOString(),
    });
    await writeFile(join(dir, 'tiny-embedder', LOCK_FILE), JSON.stringify(lock('c1')));
    const first = await load();
    expect(first.filesId).toContain('owner/tiny@c1');
    await utimes(graph(), new Date(), new Date(Date.now() + 120_000));
    expect((await load()).filesId).toBe(first.filesId);
    await writeFile(join(dir, 'tiny-embedder', LOCK_FILE), JSON.stringify(lock('c2')));
    expect((await load()).filesId).not.toBe(first.filesId);
  });
});
