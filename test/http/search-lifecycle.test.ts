/**
 * The task lifecycle on the core service, with a provider the test controls: queue order and
 * estimates, cancellation, timeouts, failures, retention, and recovery after a restart.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { ApiError } from '../../src/errors.js';
import { normaliseSearchRequest } from '../../src/search/request.js';
import { openDatabase } from '../../src/sqlite.js';
import { SqliteTaskStore } from '../../src/search/tasks/task-store.js';
import { SearchTasks, type SearchTasksOptions } from '../../src/search/tasks/local-tasks.js';
import type { SearchOutcome, SearchProvider, SearchRequest } from '../../src/search/types.js';
import { startFakeApp } from '../helpers/fake-core.js';
import type { SearchTask } from '../helpers/bodies.js';
import { auth } from '../helpers/server.js';

interface Call {
  request: SearchRequest;
  signal: AbortSignal;
  resolve(outcome: SearchOutcome): void;
  reject(error: unknown): void;
}

/** A provider whose searches end when the test says so. */
class GateProvider implements SearchProvider {
  readonly name = 'gate';
  readonly calls: Call[] = [];
  search(request: SearchRequest, signal: AbortSignal): Promise<SearchOutcome> {
    return new Promise((resolve, reject) => {
      signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
      this.calls.push({ request, signal, resolve, reject });
    });
  }
}

const outcome = (title: string): SearchOutcome => ({
  results: [{ title, url: `https://example.org/${title}`, snippet: title, score: 1, source: 'test' }],
});
const request = (query: string) => normaliseSearchRequest({ query });
const options: SearchTasksOptions = { concurrency: 1, retentionMs: 3_600_000, taskTimeoutMs: 60_000, maxPending: 100 };

const open: SearchTasks[] = [];
async function openTasks(provider: SearchProvider, overrides: Partial<SearchTasksOptions> = {}, path = ':memory:') {
  const tasks = await SearchTasks.open(new SqliteTaskStore(openDatabase(path)), provider, { ...options, ...overrides });
  open.push(tasks);
  return tasks;
}
afterEach(async () => {
  for (const tasks of open.splice(0)) await tasks.close();
});

describe('search tasks', () => {
  it('run in creation order within the concurrency, with estimates growing with the queue', async () => {
    const provider = new GateProvider();
    const tasks = await openTasks(provider);
    const a = await tasks.create('me', request('a'));
    const b = await tasks.create('me', request('b'));
    const c = await tasks.create('me', request('c'));
    expect(b.estimateWaitSeconds).toBeGreaterThan(a.estimateWaitSeconds);
    expect(c.estimateWaitSeconds).toBeGreaterThan(b.estimateWaitSeconds);
    await vi.waitFor(() => expect(provider.calls).toHaveLength(1));
    expect((await tasks.get('me', a.id))!.state).toBe('running');
    expect((await tasks.get('me', b.id))!.state).toBe('pending');
    provider.calls[0]!.resolve(outcome('a'));
    const done = await tasks.wait('me', a.id, 10_000);
    expect(done).toMatchObject({ state: 'succeeded', estimateWaitSeconds: 0, outcome: outcome('a') });
    await vi.waitFor(() => expect(provider.calls).toHaveLength(2));
    expect(provider.calls[1]!.request.query).toBe('b');
  });

  it('cancel a pending task without running it, and abort a running one', async () => {
    const provider = new GateProvider();
    const tasks = await openTasks(provider);
    const running = await tasks.create('me', request('running'));
    const pending = await tasks.create('me', request('pending'));
    await vi.waitFor(() => expect(provider.calls).toHaveLength(1));
    expect((await tasks.cancel('me', pending.id))!.state).toBe('cancelled');
    const cancelled = await tasks.cancel('me', running.id);
    expect(cancelled).toMatchObject({ state: 'cancelled', error: { code: 'cancelled' } });
    expect(provider.calls[0]!.signal.aborted).toBe(true);
    expect((await tasks.wait('me', running.id, 10_000))!.state).toBe('cancelled');
    expect(provider.calls).toHaveLength(1);
    expect(await tasks.cancel('someone else', running.id)).toBeUndefined();
  });

  it('fail with the provider error, a timeout, or a generic internal error', async () => {
    const provider = new GateProvider();
    const tasks = await openTasks(provider, { concurrency: 3, taskTimeoutMs: 200 });
    const upstream = await tasks.create('me', request('upstream'));
    const slow = await tasks.create('me', request('slow'));
    const broken = await tasks.create('me', request('broken'));
    await vi.waitFor(() => expect(provider.calls).toHaveLength(3));
    provider.calls[0]!.reject(new ApiError('upstream_error', 'SearXNG answered HTTP 500.'));
    provider.calls[2]!.reject(new TypeError('secret internals'));
    expect(await tasks.wait('me', upstream.id, 10_000)).toMatchObject({
      state: 'failed',
      error: { code: 'upstream_error', message: 'SearXNG answered HTTP 500.' },
    });
    expect(await tasks.wait('me', slow.id, 10_000)).toMatchObject({ state: 'failed', error: { code: 'timeout' } });
    expect(await tasks.wait('me', broken.id, 10_000)).toMatchObject({
      state: 'failed',
      error: { code: 'internal', message: 'Internal error while searching.' },
    });
  });

  it('refuse new tasks with overloaded when too many wait', async () => {
    const tasks = await openTasks(new GateProvider(), { maxPending: 1 });
    await tasks.create('me', request('runs'));
    await vi.waitFor(async () => expect((await tasks.create('me', request('waits'))).state).toBe('pending'));
    await expect(tasks.create('me', request('refused'))).rejects.toMatchObject({ code: 'overloaded' });
  });

  it('forget finished tasks after the retention', async () => {
    const store = new SqliteTaskStore(openDatabase(':memory:'));
    const now = Date.now();
    const base = {
      owner: 'me',
      request: request('old'),
      startedAt: now - 7_200_000,
      outcome: outcome('old'),
      error: null,
      state: 'succeeded' as const,
    };
    await store.insert({ ...base, id: 'expired', createdAt: now - 7_200_000, finishedAt: now - 7_100_000 });
    await store.insert({ ...base, id: 'kept', createdAt: now - 60_000, finishedAt: now - 50_000 });
    const tasks = await SearchTasks.open(store, new GateProvider(), { ...options, retentionMs: 3_600_000 });
    open.push(tasks);
    expect(await tasks.get('me', 'expired')).toBeUndefined();
    expect((await tasks.get('me', 'kept'))!.state).toBe('succeeded');
    expect(await store.get('expired')).toBeUndefined();
  });

  it('after a restart: keep finished records, fail running tasks, run pending ones', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'onnx-gateway-tasks-'));
    try {
      const path = join(dir, 'tasks.sqlite');
      const store = new SqliteTaskStore(openDatabase(path));
      const now = Date.now();
      const base = { owner: 'me', request: request('q'), createdAt: now, outcome: null, error: null };
      await store.insert({
        ...base,
        id: 'finished',
        state: 'succeeded',
        startedAt: now,
        finishedAt: now,
        outcome: outcome('kept'),
      });
      await store.insert({ ...base, id: 'running', state: 'running', startedAt: now, finishedAt: null });
      await store.insert({ ...base, id: 'pending', state: 'pending', startedAt: null, finishedAt: null });
      await store.close();

      const provider = new GateProvider();
      const tasks = await openTasks(provider, {}, path);
      expect(await tasks.get('me', 'finished')).toMatchObject({ state: 'succeeded', outcome: outcome('kept') });
      expect(await tasks.get('me', 'running')).toMatchObject({ state: 'failed', error: { code: 'interrupted' } });
      await vi.waitFor(() => expect(provider.calls).toHaveLength(1));
      provider.calls[0]!.resolve(outcome('rerun'));
      expect(await tasks.wait('me', 'pending', 10_000)).toMatchObject({
        state: 'succeeded',
        outcome: outcome('rerun'),
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('search settings', () => {
  it('refuse the searxng provider without an instance URL', () => {
    expect(() => loadConfig({ searchProvider: 'searxng' }, {})).toThrow(ConfigError);
    expect(() => loadConfig({ searchProvider: 'searxng', searxngUrl: 'localhost:8888' }, {})).toThrow(/searxngUrl/);
    expect(loadConfig({ searchProvider: 'searxng', searxngUrl: 'http://127.0.0.1:8888' }, {}).searxngUrl).toBe(
      'http://127.0.0.1:8888',
    );
    expect(() => loadConfig({ searchProvider: 'bing' }, {})).toThrow(/local, searxng/);
  });
});

describe('search task records across a server restart', () => {
  it('are still there, and without API keys belong to one anonymous owner', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'onnx-gateway-restart-'));
    try {
      let server = await startFakeApp({ dataDir, apiKeys: [] });
      const created = await server.app.inject({
        method: 'POST',
        url: '/v1/web-search/search',
        payload: { query: 'anything' },
      });
      expect(created.statusCode).toBe(200);
      const { id } = created.json<SearchTask>();
      const first = await server.app.inject({ method: 'GET', url: `/v1/web-search/search/${id}?wait=30` });
      expect(first.json<SearchTask>().state).toBe('succeeded');
      await server.close();

      server = await startFakeApp({ dataDir, apiKeys: [] });
      const again = await server.app.inject({ method: 'GET', url: `/v1/web-search/search/${id}`, headers: auth });
      expect(again.statusCode).toBe(200);
      expect(again.json()).toMatchObject({ id, state: 'succeeded', prompt: 'anything', results: [] });
      await server.close();
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
