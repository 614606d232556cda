/**
 * Search tasks in a real Redis (Debian's redis-server, started here): the record store's state
 * changes and expiry, and two task services in this process sharing one Redis as two replicas
 * would (test/e2e/search-redis.test.ts runs them as real server processes).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ApiError } from '../../src/errors.js';
import { RedisTaskStore } from '../../src/search/tasks/redis-task-store.js';
import { SharedSearchTasks } from '../../src/search/tasks/shared-tasks.js';
import type { SearchOutcome, SearchProvider, SearchRequest, StoredTask } from '../../src/search/types.js';
import { hasRedisServer, REDIS_SKIP_REASON, startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { missing } from '../helpers/resources.js';

const request = (query: string): SearchRequest => ({
  query,
  area: { tag: 'global' },
  freshness: 'noLimit',
  includeImages: false,
  page: 1,
  count: 5,
  format: 'json',
});

const pendingTask = (id: string, owner = 'alice'): StoredTask => ({
  id,
  owner,
  state: 'pending',
  request: request(id),
  createdAt: Date.now(),
  startedAt: null,
  finishedAt: null,
  outcome: null,
  error: null,
});

/** A provider that answers at once, or holds every search until released (or aborted). */
class HeldProvider implements SearchProvider {
  readonly name = 'held';
  readonly queries: string[] = [];
  readonly aborted: string[] = [];
  hold = false;
  private releases: (() => void)[] = [];

  async search(req: SearchRequest, signal: AbortSignal): Promise<SearchOutcome> {
    this.queries.push(req.query);
    if (this.hold) {
      await new Promise<void>((resolve, reject) => {
        this.releases.push(resolve);
        signal.addEventListener('abort', () => (this.aborted.push(req.query), reject(signal.reason as Error)), {
          once: true,
        });
      });
    }
    return {
      results: [{ title: req.query, url: 'https://example.org/', snippet: req.query, score: 1, source: 'held' }],
    };
  }

  release(): void {
    this.hold = false;
    for (const release of this.releases.splice(0)) release();
  }
}

async function until(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (await condition()) return;
    await sleep(25);
  }
  throw new Error(`gave up waiting for ${what}`);
}

describe.skipIf(missing(hasRedisServer, REDIS_SKIP_REASON))(
  `search tasks in Redis${hasRedisServer ? '' : ` (skipped: ${REDIS_SKIP_REASON})`}`,
  () => {
    let dir: string;
    let server: RedisServer;
    let redis: Redis;

    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'onnx-gateway-redis-unit-'));
      server = await startRedisServer(dir);
      redis = new Redis(server.url);
    });

    afterAll(async () => {
      await redis?.quit();
      await server?.stop();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    beforeEach(async () => {
      await redis.flushall();
    });

    describe('RedisTaskStore', () => {
      it('keeps a record as it was inserted and knows no other id', async () => {
        const store = new RedisTaskStore(redis, 60_000);
        const task = pendingTask('t1');
        await store.insert(task);
        expect(await store.get('t1')).toEqual(task);
        expect(await store.get('t2')).toBeUndefined();
      });

      it('moves a task out of a state once, however many callers race for it', async () => {
        const store = new RedisTaskStore(redis, 60_000);
        await store.insert(pendingTask('t1'));
        const started = await Promise.all(Array.from({ length: 5 }, () => store.markRunning('t1', 1000)));
        expect(started.filter(Boolean)).toHaveLength(1);
        expect((await store.get('t1'))!.state).toBe('running');

        const outcome: SearchOutcome = {
          results: [{ title: 'Cats', url: 'https://example.org/cats', snippet: 'cats', score: 0.5, source: 'x' }],
        };
        const finished = await Promise.all([
          store.finish('t1', 'succeeded', 1250, outcome, null),
          store.finish('t1', 'cancelled', 1300, null, { code: 'cancelled', message: 'The task was cancelled.' }),
        ]);
        expect(finished.filter(Boolean)).toHaveLength(1);
        const done = (await store.get('t1'))!;
        expect(done.state).toBe(finished[0] ? 'succeeded' : 'cancelled');
        expect(await store.markRunning('t1', 2000)).toBe(false);
        expect(await store.finish('t1', 'failed', 2000, null, { code: 'interrupted', message: 'x' })).toBe(false);
        expect(await store.get('t1')).toEqual(done);
        if (finished[0]) expect(done).toMatchObject({ startedAt: 1000, finishedAt: 1250, outcome, error: null });
      });

      it('lets a finished record expire after the retention, and a pending one stay', async () => {
        const store = new RedisTaskStore(redis, 45_000);
        await store.insert(pendingTask('waiting'));
        await store.insert(pendingTask('cancelled'));
        await store.finish('cancelled', 'cancelled', Date.now(), null, {
          code: 'cancelled',
          message: 'The task was cancelled.',
        });
        expect(await redis.pttl('onnx-gateway:search:task:waiting')).toBe(-1);
        const ttl = await redis.pttl('onnx-gateway:search:task:cancelled');
        expect(ttl).toBeGreaterThan(40_000);
        expect(ttl).toBeLessThanOrEqual(45_000);

        const short = new RedisTaskStore(redis, 100);
        await short.insert(pendingTask('brief'));
        await short.finish('brief', 'cancelled', Date.now(), null, {
          code: 'cancelled',
          message: 'The task was cancelled.',
        });
        await until(async () => (await short.get('brief')) === undefined, 'the record to expire');
      });

      it('shares the run times of finished tasks, newest first, the last 100', async () => {
        const store = new RedisTaskStore(redis, 60_000);
        for (let i = 1; i <= 105; i++) {
          await store.insert(pendingTask(`t${i}`));
          await store.markRunning(`t${i}`, 10_000);
          await store.finish(`t${i}`, 'succeeded', 10_000 + i, { results: [] }, null);
        }
        // A task cancelled while pending never ran: no run time.
        await store.insert(pendingTask('never-ran'));
        await store.finish('never-ran', 'cancelled', 99_999, null, { code: 'cancelled', message: 'x' });
        const other = new RedisTaskStore(redis, 60_000);
        expect(await other.recentDurations(3)).toEqual([105, 104, 103]);
        expect(await other.recentDurations(1000)).toHaveLength(100);
      });
    });

    describe('two task services on one Redis', () => {
      const opened: SharedSearchTasks[] = [];
      let providerA: HeldProvider;
      let providerB: HeldProvider;
      let a: SharedSearchTasks;
      let b: SharedSearchTasks;

      const open = async (provider: HeldProvider, maxPending = 100) => {
        const tasks = await SharedSearchTasks.open(server.url, provider, {
          concurrency: 1,
          maxPending,
          retentionMs: 60_000,
          taskTimeoutMs: 30_000,
        });
        opened.push(tasks);
        return tasks;
      };

      beforeEach(async () => {
        providerA = new HeldProvider();
        providerB = new HeldProvider();
        a = await open(providerA);
        b = await open(providerB);
      });

      afterEach(async () => {
        providerA.release();
        providerB.release();
        await Promise.all(opened.splice(0).map((tasks) => tasks.close()));
      });

      /** Both services hold their searches and each runs one: the returned ids, in the order created. */
      async function fillBothSlots(): Promise<string[]> {
        providerA.hold = providerB.hold = true;
        const ids = [(await a.create('alice', request('first'))).id, (await b.create('alice', request('second'))).id];
        await until(
          () => providerA.queries.length === 1 && providerB.queries.length === 1,
          'both services to run a task',
        );
        return ids;
      }

      it('a task created on one is read and long-polled on the other; another owner sees nothing', async () => {
        providerA.hold = providerB.hold = true;
        const created = await a.create('alice', request('cats'));
        expect(created).toMatchObject({ state: 'pending', owner: 'alice' });
        await until(() => providerA.queries.length + providerB.queries.length === 1, 'the task to start');
        expect((await b.get('alice', created.id))!.state).toBe('running');
        expect(await b.get('bob', created.id)).toBeUndefined();
        expect(await b.wait('bob', created.id, 1000)).toBeUndefined();

        // A wait far longer than the test's time limit: only the finish event can end it in time.
        const waited = b.wait('alice', created.id, 600_000);
        providerA.release();
        providerB.release();
        const done = (await waited)!;
        expect(done.state).toBe('succeeded');
        expect(done.outcome!.results[0]!.title).toBe('cats');
        expect((await a.get('alice', created.id))!.state).toBe('succeeded');
      });

      it('a task waits for no busy service while another has a free slot', async () => {
        await fillBothSlots();
        expect(providerA.queries).toHaveLength(1);
        expect(providerB.queries).toHaveLength(1);
      });

      it('cancelling through one service removes a pending task from the shared queue and aborts a running one on the other', async () => {
        const [first, second] = await fillBothSlots();
        // The service running `first`, and the other one, through which it is cancelled.
        const [runner, runnerProvider, other, otherProvider] = providerA.queries.includes('first')
          ? [a, providerA, b, providerB]
          : [b, providerB, a, providerA];
        const pending = await runner.create('alice', request('third'));
        expect(pending.state).toBe('pending');

        const cancelledPending = (await other.cancel('alice', pending.id))!;
        expect(cancelledPending.state).toBe('cancelled');
        expect(await other.cancel('bob', first!)).toBeUndefined();
        const cancelledRunning = (await other.cancel('alice', first!))!;
        expect(cancelledRunning).toMatchObject({ state: 'cancelled', error: { code: 'cancelled' } });
        await until(() => runnerProvider.aborted.includes('first'), 'the search to be aborted where it runs');
        expect((await runner.get('alice', first!))!.state).toBe('cancelled');

        // The runner's slot is free again; the cancelled pending task never runs anywhere.
        runnerProvider.hold = false;
        const fourth = await other.create('alice', request('fourth'));
        expect((await runner.wait('alice', fourth.id, 600_000))!.state).toBe('succeeded');
        otherProvider.release();
        expect((await runner.wait('alice', second!, 600_000))!.state).toBe('succeeded');
        expect([...providerA.queries, ...providerB.queries].sort()).toEqual(['first', 'fourth', 'second']);
      });

      it('refuses new tasks when the shared queue holds maxPending, whichever service is asked', async () => {
        const c = await open(providerA, 2);
        const d = await open(providerB, 2);
        await Promise.all([a.close(), b.close()]);
        providerA.hold = providerB.hold = true;
        await c.create('alice', request('first'));
        await d.create('alice', request('second'));
        await until(
          () => providerA.queries.length === 1 && providerB.queries.length === 1,
          'both services to run a task',
        );
        await c.create('alice', request('third'));
        await d.create('alice', request('fourth'));
        for (const tasks of [c, d]) {
          const refused = await tasks.create('alice', request('fifth')).then(
            () => undefined,
            (error: unknown) => error,
          );
          expect(refused).toBeInstanceOf(ApiError);
          expect((refused as ApiError).code).toBe('overloaded');
          expect((refused as ApiError).retryAfterSeconds).toBeGreaterThanOrEqual(1);
        }
      });

      it('estimates the wait from the queue and the run times every service shares', async () => {
        await fillBothSlots();
        const pending = await a.create('alice', request('third'));
        // A task that ran 30 s, finished by some other replica.
        const store = new RedisTaskStore(redis, 60_000);
        await store.insert(pendingTask('elsewhere'));
        await store.markRunning('elsewhere', 100_000);
        await store.finish('elsewhere', 'succeeded', 130_000, { results: [] }, null);
        // Two running on two slots ahead of it: one round of 30 s, then its own 30 s.
        expect((await b.get('alice', pending.id))!.estimateWaitSeconds).toBe(60);
        expect((await a.get('alice', pending.id))!.estimateWaitSeconds).toBe(60);
      });
    });
  },
);
