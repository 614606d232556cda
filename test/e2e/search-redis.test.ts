/**
 * Two replicas sharing web search tasks through a real Redis (Debian's redis-server, started here
 * on a free port): tasks created on one are run by whichever replica is free and readable on
 * both; cancelling and long-polling work across replicas; a replica that dies or stops leaves no
 * task stuck. Each replica searches its own stand-in SearXNG, so the test can see who ran what.
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startStandInSearxng, type StandInSearxng } from '../fixtures/stand-in-searxng.js';
import {
  freePort,
  hasRedisServer,
  REDIS_SKIP_REASON,
  startRedisServer,
  type RedisServer,
} from '../helpers/redis-server.js';
import { listeningUrl, spawnTinyServer, type ServerProcess } from '../helpers/server-process.js';
import { missing } from '../helpers/resources.js';

const KEY_A = 'replica-test-key-a';
const KEY_B = 'replica-test-key-b';

interface Replica {
  process: ServerProcess;
  url: string;
  searxng: StandInSearxng;
}

/** A search task, or an error (the fields read here). */
interface Answer {
  id?: string;
  state?: string;
  results?: unknown[];
  error?: { code: string };
}

describe.skipIf(missing(hasRedisServer, REDIS_SKIP_REASON))(
  `search tasks shared by two replicas through Redis${hasRedisServer ? '' : ` (skipped: ${REDIS_SKIP_REASON})`}`,
  () => {
    let redis: RedisServer;
    let redisUrl: string;
    let dir: string;
    const replicas: Replica[] = [];
    const standIns: StandInSearxng[] = [];

    async function startReplica(name: string, searxng: StandInSearxng): Promise<Replica> {
      const process_ = spawnTinyServer(join(dir, name), {
        ONNX_GATEWAY_API_KEYS: `${KEY_A},${KEY_B}`,
        ONNX_GATEWAY_SEARCH_PROVIDER: 'searxng',
        ONNX_GATEWAY_SEARXNG_URL: searxng.url,
        ONNX_GATEWAY_SEARXNG_TIMEOUT: '4000',
        ONNX_GATEWAY_SEARCH_CONCURRENCY: '1',
        ONNX_GATEWAY_REDIS_URL: redisUrl,
      });
      const replica = { process: process_, url: await listeningUrl(process_), searxng };
      replicas.push(replica);
      return replica;
    }

    const call = async (replica: Replica, method: string, path: string, key = KEY_A, body?: unknown) => {
      const response = await fetch(`${replica.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      return { status: response.status, body: (await response.json()) as Answer };
    };
    const create = async (replica: Replica, query = 'cats') => {
      const { status, body } = await call(replica, 'POST', '/v1/web-search/search', KEY_A, { query });
      expect(status).toBe(200);
      expect(body.state).toBe('pending');
      return body.id as string;
    };
    const waitFor = (replica: Replica, id: string, seconds = 30) =>
      call(replica, 'GET', `/v1/web-search/search/${id}?wait=${seconds}`);

    /** Creates tasks on `via` until one is running on `target` (whose stand-in hangs); its id. */
    async function taskHungOn(target: Replica, via: Replica): Promise<string> {
      const before = target.searxng.requests.length;
      for (let i = 0; i < 20; i++) {
        const id = await create(via);
        for (let t = 0; t < 50 && target.searxng.requests.length === before; t++) {
          const { body } = await call(via, 'GET', `/v1/web-search/search/${id}`);
          if (body.state !== 'pending' && body.state !== 'running') break;
          await sleep(20);
        }
        if (target.searxng.requests.length > before) return id;
      }
      throw new Error('no task reached the hanging replica');
    }

    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'onnx-gateway-redis-'));
      redis = await startRedisServer(dir);
      redisUrl = redis.url;
      standIns.push(await startStandInSearxng(), await startStandInSearxng());
      await Promise.all([startReplica('a', standIns[0]!), startReplica('b', standIns[1]!)]);
    }, 120_000);

    afterAll(async () => {
      for (const replica of replicas)
        if (replica.process.child.exitCode === null) replica.process.child.kill('SIGKILL');
      await Promise.all(standIns.map((s) => s.close()));
      await redis?.stop();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it('a task created on one replica is readable and long-pollable on the other; another key gets 404', async () => {
      const [a, b] = replicas as [Replica, Replica];
      const id = await create(a);
      const done = await waitFor(b, id);
      expect(done.status).toBe(200);
      expect(done.body).toMatchObject({ id, prompt: 'cats', state: 'succeeded', provider: 'searxng' });
      expect(done.body.results!.length).toBeGreaterThan(0);
      expect((await call(a, 'GET', `/v1/web-search/search/${id}`)).body.state).toBe('succeeded');
      for (const replica of [a, b]) {
        const other = await call(replica, 'GET', `/v1/web-search/search/${id}`, KEY_B);
        expect(other.status).toBe(404);
        expect(other.body.error!.code).toBe('not_found');
      }
    });

    it('tasks are run by whichever replica is free', async () => {
      const [a, b] = replicas as [Replica, Replica];
      const before = [a.searxng.requests.length, b.searxng.requests.length];
      const ids = [];
      for (let i = 0; i < 10; i++) ids.push(await create(i % 2 ? a : b, `query ${i}`));
      for (const id of ids) expect((await waitFor(a, id)).body.state).toBe('succeeded');
      // Every task searched exactly once, and both replicas took part.
      const ran = [a.searxng.requests.length - before[0]!, b.searxng.requests.length - before[1]!];
      expect(ran[0]! + ran[1]!).toBe(10);
      expect(ran[0]).toBeGreaterThan(0);
      expect(ran[1]).toBeGreaterThan(0);
    });

    it('cancelling through one replica aborts the task running on the other, which goes on working', async () => {
      const [a, b] = replicas as [Replica, Replica];
      a.searxng.behaviour = 'hang';
      const id = await taskHungOn(a, b);
      expect((await call(b, 'GET', `/v1/web-search/search/${id}`)).body.state).toBe('running');
      const cancelled = await call(b, 'DELETE', `/v1/web-search/search/${id}`);
      expect(cancelled.status).toBe(200);
      expect(cancelled.body.state).toBe('cancelled');
      expect((await call(a, 'GET', `/v1/web-search/search/${id}`)).body.state).toBe('cancelled');
      // A's slot is free again at once (well before the 4 s SearXNG timeout would have freed it).
      a.searxng.behaviour = 'ok';
      const before = a.searxng.requests.length;
      for (let i = 0; i < 20 && a.searxng.requests.length === before; i++) await waitFor(b, await create(b));
      expect(a.searxng.requests.length).toBeGreaterThan(before);
    });

    it('a replica killed while running a task: the task ends failed (interrupted), never stuck in running', async () => {
      const [a, b] = replicas as [Replica, Replica];
      a.searxng.behaviour = 'hang';
      const id = await taskHungOn(a, b);
      a.process.child.kill('SIGKILL');
      await a.process.exited;
      // The job's lock expires (10 s) and B's stalled-job check (every 5 s) fails it.
      const done = await waitFor(b, id, 40);
      expect(done.body.state).toBe('failed');
      expect(done.body.error!.code).toBe('interrupted');
    }, 60_000);

    it('a replica stopped with SIGTERM leaves its pending tasks to the others', async () => {
      const b = replicas[1]!;
      const c = await startReplica('c', standIns[0]!);
      // Both replicas busy with a hanging search, two more tasks waiting.
      c.searxng.behaviour = 'hang';
      b.searxng.behaviour = 'hang';
      const ids = [];
      for (let i = 0; i < 4; i++) ids.push(await create(b, `pending ${i}`));
      for (let t = 0; t < 200 && c.searxng.requests.length + b.searxng.requests.length < 2; t++) await sleep(25);
      b.process.child.kill('SIGTERM');
      expect(await b.process.exited).toBe(0);
      // C finishes its hanging task (SearXNG timeout: failed), then runs what B left waiting.
      c.searxng.behaviour = 'ok';
      const states = [];
      for (const id of ids) states.push((await waitFor(c, id, 40)).body);
      expect(states.filter((task) => task.state === 'succeeded')).toHaveLength(2);
      for (const task of states.filter((t) => t.state !== 'succeeded')) {
        expect(task.state).toBe('failed');
        expect(['shutting_down', 'upstream_error', 'timeout']).toContain(task.error!.code);
      }
    }, 90_000);

    it('refuses to start when Redis is not reachable', async () => {
      const port = await freePort();
      const result = spawnSync(process.execPath, ['dist/cli/index.js', 'serve'], {
        env: {
          ...process.env,
          ONNX_GATEWAY_MODELS_DIR: inject('tinyModelsDir'),
          ONNX_GATEWAY_MODELS: 'tiny-embedder,tiny-reranker',
          ONNX_GATEWAY_DATA_DIR: join(dir, 'refused'),
          ONNX_GATEWAY_PORT: '0',
          ONNX_GATEWAY_API_KEYS: KEY_A,
          ONNX_GATEWAY_HOST: '127.0.0.1',
          ONNX_GATEWAY_WORKERS: '1',
          ONNX_GATEWAY_REDIS_URL: `redis://:secret@127.0.0.1:${port}`,
        },
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(result.status).toBe(1);
      expect(result.stderr).toContain('onnx-gateway can not start');
      expect(result.stderr).toContain('is not reachable');
      expect(result.stderr).not.toContain('secret');
    }, 70_000);

    it('answers 503 store_unavailable while Redis is away, never a 500 or a hang', async () => {
      const c = replicas[2]!;
      const id = await create(c);
      await redis.stop();
      for (const [method, path, body] of [
        ['GET', `/v1/web-search/search/${id}`],
        ['POST', '/v1/web-search/search', { query: 'cats' }],
        ['DELETE', `/v1/web-search/search/${id}`],
      ] as const) {
        const response = await call(c, method, path, KEY_A, body);
        expect(response.status, `${method} ${path}`).toBe(503);
        expect(response.body.error!.code).toBe('store_unavailable');
      }
      // Embeddings do not need Redis.
      const embeddings = await call(c, 'POST', '/v1/embeddings', KEY_A, {
        model: 'tiny-embedder',
        input: 'still here',
      });
      expect(embeddings.status).toBe(200);
    }, 60_000);
  },
);
