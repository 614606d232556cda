/**
 * The model lifecycle on real worker threads and sessions (the tiny models), with each model's
 * measured session size replaced by a fixed one, so that what fits the budget does not depend on
 * this machine's allocator: loads on demand, a request that arrives while its model loads, unload
 * and reload with the same vectors, least recently used eviction, 503 when nothing can make room,
 * keep-alive, and load/unload cycles that leave no thread behind.
 */
import { readFileSync } from 'node:fs';
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { Engine, type EngineOptions } from '../../src/engine/engine.js';
import { loadCatalogue } from '../../src/models/catalogue.js';
import { Registry, type ServedModel } from '../../src/models/registry.js';
import { ApiError } from '../../src/errors.js';

const MB = 2 ** 20;
const config: EngineOptions['config'] = {
  workers: 2,
  intraOpThreads: 1,
  soloThreads: 1,
  ortSpinning: false,
  ortMemoryArena: true,
  maxBatchTokens: 256,
  gpuMaxBatchTokens: 16384,
  maxBatchSize: 8,
  queueCapacity: 1000,
  memoryBudgetMb: 100,
  preload: false,
  keepAliveMs: -1,
};

let dir: string;
let all: ServedModel[];
let engine: Engine | undefined;
beforeAll(async () => {
  // A third model: a copy of the embedder under another name.
  dir = await mkdtemp(join(tmpdir(), 'onnx-gateway-lifecycle-'));
  await cp(inject('tinyModelsDir'), dir, { recursive: true });
  await cp(join(dir, 'tiny-embedder'), join(dir, 'tiny-embedder-copy'), { recursive: true });
  await cp(join(dir, 'tiny-embedder'), join(dir, 'tiny-embedder-broken'), { recursive: true });
  all = (
    await Registry.load(
      ['tiny-embedder', 'tiny-reranker', 'tiny-embedder-copy', 'tiny-embedder-broken'],
      dir,
      loadCatalogue(),
    )
  ).list();
  // Its graph breaks after the registry read it: the load on demand fails.
  await writeFile(join(dir, 'tiny-embedder-broken', 'onnx', 'model.onnx'), 'not a graph');
});
afterEach(async () => {
  await engine?.close();
  engine = undefined;
});
afterAll(() => rm(dir, { recursive: true, force: true }));

async function start(overrides: Partial<EngineOptions['config']>, sizes: Record<string, number>): Promise<Engine> {
  const models = all.filter((model) => model.id in sizes);
  engine = new Engine({
    config: { ...config, ...overrides },
    models,
    measureSession: (model) => sizes[model.id]! * MB,
  });
  await engine.ready;
  return engine;
}

const ids = (values: number[]) => ({ ids: Int32Array.from(values) });
const input = [ids([2, 15, 27, 3]), ids([2, 40, 41, 42, 43, 3])];
const pair = [{ ids: Int32Array.from([2, 15, 3, 27, 3]), typeIds: Uint8Array.from([0, 0, 0, 1, 1]) }];

describe('model lifecycle', () => {
  it('loads a model on its first request, which waits for it, and serves it placed in the budget', async () => {
    const engine = await start({}, { 'tiny-embedder': 10, 'tiny-reranker': 10 });
    expect(engine.state('tiny-embedder')).toEqual({ status: 'unloaded' });
    const job = engine.scheduler.submit('tiny-embedder', input);
    // The request arrived before the model: it loads while the request waits in the queue.
    expect(engine.state('tiny-embedder')!.status).toBe('loading');
    const result = await job;
    expect(result.output.length).toBe(2 * result.width);
    const state = engine.state('tiny-embedder')!;
    expect(state.status).toBe('loaded');
    // 2 sessions of 10 MB fit 100 MB; the solo session is off (soloThreads = intra-op threads).
    expect(state.placement).toEqual({ device: 'cpu', sessions: 2, threadsPerSession: 1, soloThreads: 0 });
    expect(state.residentBytes).toBeGreaterThan(0);
    // The other model was not asked for.
    expect(engine.state('tiny-reranker')!.status).toBe('unloaded');
  });

  it('unloads a model and loads it again with identical vectors', async () => {
    const engine = await start({}, { 'tiny-embedder': 10, 'tiny-reranker': 10 });
    const before = await engine.scheduler.submit('tiny-embedder', input);
    await engine.unload('tiny-embedder');
    expect(engine.state('tiny-embedder')!.status).toBe('unloaded');
    const after = await engine.scheduler.submit('tiny-embedder', input);
    expect(Array.from(after.output)).toEqual(Array.from(before.output));
  });

  it('makes room by unloading the least recently used idle model', async () => {
    // Each model needs 40 MB a session: one model's two sessions fill most of the 100 MB budget.
    const engine = await start({}, { 'tiny-embedder': 40, 'tiny-reranker': 40 });
    await engine.scheduler.submit('tiny-embedder', input);
    expect(engine.state('tiny-embedder')!.placement!.sessions).toBe(2);
    await engine.scheduler.submit('tiny-reranker', pair);
    // The embedder (least recently used, idle) made room for the reranker.
    expect(engine.state('tiny-embedder')!.status).toBe('unloaded');
    expect(engine.state('tiny-reranker')).toMatchObject({ status: 'loaded', placement: { sessions: 2 } });
    await engine.scheduler.submit('tiny-embedder', input);
    expect(engine.state('tiny-reranker')!.status).toBe('unloaded');
    expect(engine.state('tiny-embedder')!.status).toBe('loaded');
  });

  it('evicts in least recently used order among several idle models', async () => {
    // One session each (workers: 1) of 40 MB: two models fit the 100 MB budget, not three.
    const sizes = { 'tiny-embedder': 40, 'tiny-reranker': 40, 'tiny-embedder-copy': 40 };
    const engine = await start({ workers: 1 }, sizes);
    await engine.scheduler.submit('tiny-reranker', pair);
    await engine.scheduler.submit('tiny-embedder', input);
    // The reranker was used least recently: the copy's load unloads it, not the embedder.
    await engine.scheduler.submit('tiny-embedder-copy', input);
    expect(engine.state('tiny-reranker')!.status).toBe('unloaded');
    expect(engine.state('tiny-embedder')!.status).toBe('loaded');
    // Now the embedder is the least recently used of the two loaded.
    await engine.scheduler.submit('tiny-reranker', pair);
    expect(engine.state('tiny-embedder')!.status).toBe('unloaded');
    expect(engine.state('tiny-embedder-copy')!.status).toBe('loaded');
    expect(engine.state('tiny-reranker')!.status).toBe('loaded');
  });

  it('answers 503 with retry-after, naming the budget, when no idle model can make room', async () => {
    // One input a batch, so that the embedder's long job keeps it busy for seconds.
    const engine = await start(
      { maxBatchSize: 1, queueCapacity: 100_000 },
      { 'tiny-embedder': 60, 'tiny-reranker': 60 },
    );
    await engine.scheduler.submit('tiny-embedder', input);
    const busy = engine.scheduler.submit(
      'tiny-embedder',
      Array.from({ length: 10_000 }, () => input[1]!),
    );
    const refused = engine.scheduler.submit('tiny-reranker', pair);
    const error = (await refused.catch((e: unknown) => e)) as ApiError;
    // The embedder was still busy when the reranker's load gave up.
    expect(engine.scheduler.pending('tiny-embedder')).toBeGreaterThan(0);
    expect(error).toBeInstanceOf(ApiError);
    expect(error.status).toBe(503);
    expect(error.code).toBe('insufficient_memory');
    expect(error.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(error.message).toMatch(/"tiny-reranker" needs 60 MB for one session, but the memory budget is 100 MB/);
    await busy;
    expect(engine.state('tiny-reranker')!.status).toBe('unloaded');
  });

  it('answers a model larger than the whole budget at once, with no retry-after, and a model that fails to open with model_load_failed', async () => {
    const engine = await start({}, { 'tiny-embedder': 150, 'tiny-embedder-broken': 10 });
    const tooLarge = (await engine.scheduler.submit('tiny-embedder', input).catch((e: unknown) => e)) as ApiError;
    expect(tooLarge).toMatchObject({ code: 'insufficient_memory', status: 503, permanent: true });
    expect(tooLarge.retryAfterSeconds).toBeUndefined();
    const broken = (await engine.scheduler.submit('tiny-embedder-broken', input).catch((e: unknown) => e)) as ApiError;
    expect(broken).toMatchObject({ code: 'model_load_failed', status: 500, permanent: true });
    expect(broken.message).toMatch(/"tiny-embedder-broken" could not be loaded/);
    expect(engine.state('tiny-embedder-broken')!.status).toBe('unloaded');
  });

  it('refuses at start a listed model that does not fit even as one session', async () => {
    await expect(start({ preload: true }, { 'tiny-embedder': 40, 'tiny-reranker': 120 })).rejects.toMatchObject({
      code: 'memory_budget',
      message: expect.stringMatching(
        /"tiny-reranker" needs 120 MB for one session, but the memory budget is 100 MB/,
      ) as unknown,
    });
    engine = undefined;
  });

  it('unloads a model idle for its keep-alive, and at once with a keep-alive of 0', async () => {
    const engine = await start({ keepAliveMs: 300 }, { 'tiny-embedder': 10, 'tiny-reranker': 10 });
    await engine.scheduler.submit('tiny-embedder', input);
    expect(engine.state('tiny-embedder')!.status).toBe('loaded');
    expect(engine.state('tiny-embedder')!.expiresAt).toBeInstanceOf(Date);
    await expect.poll(() => engine.state('tiny-embedder')!.status, { timeout: 10_000 }).toBe('unloaded');
    engine.keepAlive('tiny-reranker', 0);
    await engine.scheduler.submit('tiny-reranker', pair);
    await expect.poll(() => engine.state('tiny-reranker')!.status, { timeout: 10_000 }).toBe('unloaded');
    // Never, with a negative keep-alive.
    engine.keepAlive('tiny-embedder', -1);
    await engine.scheduler.submit('tiny-embedder', input);
    expect(engine.state('tiny-embedder')!.expiresAt).toBeUndefined();
  });

  it('leaves no thread behind over load and unload cycles under traffic, solo sessions included', async () => {
    const engine = await start({ soloThreads: 2 }, { 'tiny-embedder': 10, 'tiny-reranker': 10 });
    const cycle = async () => {
      for (const [model, items] of [
        ['tiny-embedder', input],
        ['tiny-reranker', pair],
      ] as const) {
        await engine.load(model);
        await Promise.all(Array.from({ length: 4 }, () => engine.scheduler.submit(model, items)));
        await engine.unload(model);
      }
    };
    // The first cycle starts what the process keeps for good (libuv's pool, ONNX Runtime's globals).
    await cycle();
    const baseline = processThreads();
    for (let i = 0; i < 2; i++) await cycle();
    // Each load starts three worker threads (two sessions and the solo session, whose second
    // intra-op thread is ONNX Runtime's): every one of them ended with its unload.
    expect(processThreads()).toBe(baseline);
    expect(engine.state('tiny-embedder')).toEqual({ status: 'unloaded' });
    expect(engine.restarts).toBe(0);
    // Nine lanes opened one after another: slow on a busy machine, whatever it measures.
  }, 300_000);
});

/** The threads of this process, as the kernel counts them: worker threads and native ones alike. */
function processThreads(): number {
  return Number(/^Threads:\s+(\d+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))![1]);
}
