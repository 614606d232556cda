/**
 * One local index for every replica through a real Redis (Debian's redis-server on a free port):
 * two server processes, each with its own data dir, apply the stream of index writes to their own
 * SQLite copies. A document added through one is searchable through the other, a delete through
 * the other reaches the first, a replica restarted later replays what it missed from its last
 * applied entry, and a new replica started after the stream was trimmed loads the snapshot.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasRedisServer, REDIS_SKIP_REASON, startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { missing } from '../helpers/resources.js';
import { listeningUrl, spawnTinyServer, type ServerProcess } from '../helpers/server-process.js';

/** Entries the stream keeps before a snapshot replaces the older ones: small, so the test trims. */
const streamLength = 4;

interface Replica {
  name: string;
  process: ServerProcess;
  url: string;
}

/** GET /v1/web-search/index, with Redis (as here): the fields read here. */
interface IndexStats {
  documents: number;
  vectors: Record<string, number>;
  replication: {
    last_applied_id: string | null;
    applied: number;
    written: number;
    behind: number;
    lag_seconds: number;
    snapshots_loaded: number;
  };
}

describe.skipIf(missing(hasRedisServer, REDIS_SKIP_REASON))(
  `one local index for every replica through Redis${hasRedisServer ? '' : ` (skipped: ${REDIS_SKIP_REASON})`}`,
  () => {
    let redis: RedisServer;
    let client: Redis;
    let dir: string;
    const running: Replica[] = [];

    async function startReplica(name: string): Promise<Replica> {
      const server = spawnTinyServer(join(dir, name), {
        ONNX_GATEWAY_REDIS_URL: redis.url,
        ONNX_GATEWAY_SEARCH_INDEX_STREAM_LENGTH: String(streamLength),
      });
      const replica = { name, process: server, url: await listeningUrl(server) };
      running.push(replica);
      return replica;
    }

    async function stop(replica: Replica): Promise<void> {
      replica.process.child.kill('SIGTERM');
      await replica.process.exited;
      running.splice(running.indexOf(replica), 1);
    }

    const named = (name: string) => running.find((replica) => replica.name === name)!;

    const call = async <T = unknown>(
      replica: Replica,
      method: string,
      path: string,
      body?: unknown,
    ): Promise<{ status: number; body: T }> => {
      const response = await fetch(`${replica.url}${path}`, {
        method,
        headers: body ? { 'content-type': 'application/json' } : {},
        body: body ? JSON.stringify(body) : undefined,
      });
      return { status: response.status, body: (await response.json()) as T };
    };

    const add = async (replica: Replica, id: string, text: string) => {
      const response = await call(replica, 'POST', '/v1/web-search/index/documents', {
        documents: [{ id, title: id, text }],
      });
      expect(response.status).toBe(200);
      return response.body;
    };

    const describeIndex = async (replica: Replica) =>
      (await call<IndexStats>(replica, 'GET', '/v1/web-search/index')).body;

    /** Polls a replica's index description until `test` passes (applying is asynchronous on the others). */
    async function indexOf(replica: Replica, test: (index: IndexStats) => boolean): Promise<IndexStats> {
      let index = await describeIndex(replica);
      for (let i = 0; i < 300 && !test(index); i++) {
        await sleep(50);
        index = await describeIndex(replica);
      }
      return index;
    }

    /** The urls a search through `replica` finds, best first. */
    async function search(replica: Replica, query: string): Promise<string[]> {
      const created = await call<{ id: string }>(replica, 'POST', '/v1/web-search/search', { query });
      expect(created.status).toBe(200);
      const done = await call<{ state: string; results: { url: string }[] }>(
        replica,
        'GET',
        `/v1/web-search/search/${created.body.id}?wait=30`,
      );
      expect(done.body.state).toBe('succeeded');
      return done.body.results.map((r) => r.url);
    }

    const url = (id: string) => `urn:onnx-gateway:document:${id}`;

    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'onnx-gateway-index-replicas-'));
      redis = await startRedisServer(dir);
      client = new Redis(redis.url);
      await Promise.all([startReplica('a'), startReplica('b')]);
    }, 120_000);

    afterAll(async () => {
      for (const replica of running) replica.process.child.kill('SIGKILL');
      client?.disconnect();
      await redis?.stop();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it('a document added through one replica is searchable through the other; a delete through the other reaches the first', async () => {
      const [a, b] = [named('a'), named('b')];
      expect(
        await add(a, 'otters', 'Sea otters hold hands while they sleep so they do not drift apart.'),
      ).toMatchObject({ added: 1, updated: 0, ids: ['otters'] });
      // The writer answers once its own copy has the document.
      expect(await describeIndex(a)).toMatchObject({
        documents: 1,
        replication: { applied: 1, written: 1, behind: 0 },
      });
      const onB = await indexOf(b, (index) => index.documents === 1);
      expect(onB).toMatchObject({
        documents: 1,
        vectors: { 'tiny-embedder': 1 },
        replication: { applied: 1, behind: 0, lag_seconds: 0, snapshots_loaded: 0 },
      });
      expect(onB.replication.last_applied_id).toMatch(/^\d+-\d+$/);
      expect(await search(b, 'otters sleep')).toContain(url('otters'));

      await add(b, 'herons', 'Grey herons stand still in shallow water and wait for fish.');
      expect((await call(b, 'DELETE', '/v1/web-search/index/documents/otters')).body).toEqual({
        id: 'otters',
        deleted: true,
      });
      const onA = await indexOf(a, (index) => index.replication.applied === 3);
      expect(onA).toMatchObject({ documents: 1, replication: { applied: 3, behind: 0 } });
      expect(await search(a, 'herons fish')).toContain(url('herons'));
      expect(await search(a, 'otters sleep')).not.toContain(url('otters'));
      // Replacing keeps one document per id; deleting what is not there is a 404 without a write.
      expect(await add(a, 'herons', 'Grey herons wait for fish, then strike.')).toMatchObject({ added: 0, updated: 1 });
      expect((await call(a, 'DELETE', '/v1/web-search/index/documents/otters')).status).toBe(404);
      expect(await indexOf(b, (index) => index.replication.applied === 4)).toMatchObject({
        documents: 1,
        replication: { written: 4 },
      });
    }, 120_000);

    it('a replica restarted later replays the entries it missed from its last applied one', async () => {
      const [a, b] = [named('a'), named('b')];
      await stop(b);
      await add(a, 'beavers', 'Beavers build dams of branches and mud across streams.');
      const restarted = await startReplica('b');
      const index = await describeIndex(restarted);
      // Caught up before it listened, from the stream alone.
      expect(index).toMatchObject({
        documents: 2,
        replication: { applied: 5, written: 5, behind: 0, snapshots_loaded: 0 },
      });
      expect(await search(restarted, 'beavers dams')).toContain(url('beavers'));
    }, 120_000);

    it('after the stream is trimmed, a new replica loads the snapshot and reads on; lag is in /metrics', async () => {
      const a = named('a');
      for (const [id, text] of [
        ['swifts', 'Swifts sleep on the wing and land only to nest.'],
        ['moles', 'Moles dig tunnels and eat earthworms.'],
        ['bats', 'Bats find insects in the dark by echolocation.'],
      ])
        await add(a, id!, text!);
      expect(await describeIndex(a)).toMatchObject({ documents: 5, replication: { applied: 8 } });
      // A replica snapshots its copy and trims the entries before it once the stream is longer than allowed.
      let snapshot = 0;
      for (let i = 0; i < 200 && snapshot === 0; i++) {
        snapshot = Number((await client.hget('onnx-gateway:index:snapshot', 'sequence')) ?? 0);
        if (snapshot === 0) await sleep(50);
      }
      expect(snapshot).toBeGreaterThan(streamLength);
      const first = await client.xrange('onnx-gateway:index:stream', '-', '+', 'COUNT', 1);
      expect(Number(first[0]![1][1])).toBeGreaterThan(1);

      const late = await startReplica('c');
      const index = await indexOf(late, (i) => i.replication.applied === 8);
      expect(index).toMatchObject({
        documents: 5,
        vectors: { 'tiny-embedder': 5 },
        replication: { applied: 8, written: 8, behind: 0, snapshots_loaded: 1 },
      });
      expect(await search(late, 'echolocation insects')).toContain(url('bats'));
      expect(await search(late, 'herons strike')).toContain(url('herons'));

      // Writes after the snapshot reach the late replica through the stream.
      await add(late, 'otters', 'Sea otters are back.');
      expect(await indexOf(a, (i) => i.replication.applied === 9)).toMatchObject({ documents: 6 });
      const metrics = await (await fetch(`${late.url}/metrics`)).text();
      expect(metrics).toMatch(/^onnx_gateway_index_replication_behind_entries 0$/m);
      expect(metrics).toMatch(/^onnx_gateway_index_replication_applied_entries 9$/m);
      expect(metrics).toMatch(/^onnx_gateway_index_replication_lag_seconds 0$/m);
    }, 120_000);
  },
);
