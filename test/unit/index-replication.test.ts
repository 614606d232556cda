/**
 * The replication of the local index through a real Redis (Debian's redis-server, started here),
 * in this process: copies applying the same stream end equal, an entry is applied once even by
 * two processes sharing one file, a stalled copy reports how far behind it is, `index add` writes
 * through the stream, and a write while Redis is away is a 503
 * (test/e2e/search-index-replicas.test.ts runs real server processes).
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DocumentIndex, type IndexDocument } from '../../src/search/index/document-index.js';
import { IndexReplication } from '../../src/search/index/replication.js';
import { hasRedisServer, REDIS_SKIP_REASON, startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { missing } from '../helpers/resources.js';

const doc = (key: string, text: string): IndexDocument => ({
  key,
  url: `https://example.org/${key}`,
  title: key,
  text,
  source: 'test',
});

async function until(test: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200 && !(await test()); i++) await sleep(25);
}

describe.skipIf(missing(hasRedisServer, REDIS_SKIP_REASON))(
  `index replication through Redis${hasRedisServer ? '' : ` (skipped: ${REDIS_SKIP_REASON})`}`,
  () => {
    let dir: string;
    let redis: RedisServer;
    let client: Redis;

    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'onnx-gateway-index-replication-'));
      redis = await startRedisServer(dir);
      client = new Redis(redis.url);
      client.on('error', () => undefined);
    }, 30_000);

    afterAll(async () => {
      client?.disconnect();
      await redis?.stop();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it('copies applying the stream end equal, vectors included; two processes on one file apply each entry once', async () => {
      const one = DocumentIndex.open(join(dir, 'one.sqlite'));
      const other = DocumentIndex.open(':memory:');
      // A second connection to one.sqlite, as `index add` has next to a running server.
      const sameFile = DocumentIndex.open(join(dir, 'one.sqlite'));
      const replicas = await Promise.all(
        [one, other, sameFile].map((index) => IndexReplication.open(redis.url, index, { streamLength: 1000 })),
      );
      try {
        const dense = { model: 'm', dimensions: 2, data: new Float32Array([1, 0, 0.6, 0.8]) };
        expect(await replicas[0]!.upsert([doc('a', 'sea otters'), doc('b', 'river otters')], { dense })).toMatchObject({
          added: 2,
          updated: 0,
        });
        expect(await replicas[1]!.upsert([doc('b', 'river otters and beavers')])).toMatchObject({
          added: 0,
          updated: 1,
        });
        expect(await replicas[2]!.remove('a')).toBe(true);
        expect(await replicas[2]!.remove('a')).toBe(false);
        await until(() => [one, other].every((index) => index.applied()?.sequence === 3));
        for (const index of [one, other, sameFile]) {
          expect(index.applied()?.sequence).toBe(3);
          expect(index.stats()).toMatchObject({ documents: 1, vectors: {} });
          expect(index.bm25('beavers', 5)).toHaveLength(1);
        }
        // The replaced document lost its vector; a copy that receives vectors (dense and sparse) stores them bit for bit.
        const sparse = {
          model: 's',
          vectors: [{ indices: new Int32Array([3, 70000]), values: new Float32Array([0.5, 1.25]) }],
        };
        await replicas[1]!.upsert([doc('c', 'herons')], {
          dense: { model: 'm', dimensions: 2, data: new Float32Array([0.6, 0.8]) },
          sparse,
        });
        await until(() => one.applied()?.sequence === 4);
        const query = { indices: new Int32Array([70000]), values: new Float32Array([2]) };
        for (const index of [one, other])
          expect(index.sparse(query, 's', 5)).toEqual([{ id: index.idsOf(['c']).get('c'), score: 2.5 }]);
        expect(one.dense(new Float32Array([0.6, 0.8]), 'm', 1)).toEqual([
          { id: one.idsOf(['c']).get('c'), score: expect.closeTo(1, 6) as unknown },
        ]);
        expect(other.dense(new Float32Array([0.6, 0.8]), 'm', 1)[0]!.score).toBe(
          one.dense(new Float32Array([0.6, 0.8]), 'm', 1)[0]!.score,
        );
      } finally {
        await Promise.all(replicas.map((r) => r.close()));
        for (const index of [one, other, sameFile]) index.close();
      }
    });

    it('a copy stalled on an entry it can not apply stays there and reports the entries and seconds it is behind', async () => {
      const index = DocumentIndex.open(':memory:');
      const replication = await IndexReplication.open(redis.url, index, { streamLength: 1000 });
      try {
        const applied = index.applied()!;
        const ms = Number(applied.id.split('-')[0]);
        // An entry written 5 s after the last one, that no copy can parse, then a good one.
        const next = await client.incr('onnx-gateway:index:sequence');
        await client.xadd(
          'onnx-gateway:index:stream',
          `${ms + 5000}-0`,
          'sequence',
          String(next),
          'operation',
          '{not json',
        );
        const after = await client.incr('onnx-gateway:index:sequence');
        await client.xadd(
          'onnx-gateway:index:stream',
          `${ms + 5000}-1`,
          'sequence',
          String(after),
          'operation',
          JSON.stringify({ op: 'delete', keys: ['x'] }),
        );
        expect(await replication.status()).toMatchObject({
          lastAppliedId: applied.id,
          lastAppliedSequence: applied.sequence,
          headSequence: applied.sequence + 2,
          behind: 2,
          lagSeconds: 5,
        });
        expect(index.applied()).toEqual(applied);
      } finally {
        await replication.close();
        index.close();
        // Later tests start from a stream without the broken entry.
        await client.del('onnx-gateway:index:stream', 'onnx-gateway:index:sequence', 'onnx-gateway:index:snapshot');
      }
    });

    it('index add --redis-url writes through the stream: another copy gets the documents', async () => {
      const file = join(dir, 'docs.jsonl');
      await writeFile(
        file,
        [
          { id: 'd1', title: 'Otters', text: 'Sea otters sleep holding hands.' },
          { id: 'd2', text: 'Herons fish.' },
        ]
          .map((d) => JSON.stringify(d))
          .join('\n'),
      );
      const result = spawnSync(
        process.execPath,
        [
          'dist/cli/index.js',
          'index',
          'add',
          '--no-embed',
          '--data-dir',
          join(dir, 'cli'),
          '--redis-url',
          redis.url,
          file,
        ],
        { encoding: 'utf8' },
      );
      expect(result.stderr).toContain('added 2');
      expect(result.status).toBe(0);
      const index = DocumentIndex.open(':memory:');
      const replication = await IndexReplication.open(redis.url, index, { streamLength: 1000 });
      try {
        expect(index.stats().documents).toBe(2);
        expect(index.bm25('otters', 5)).toHaveLength(1);
        expect(await replication.status()).toMatchObject({ behind: 0, lastAppliedSequence: 1 });
      } finally {
        await replication.close();
        index.close();
      }
    }, 60_000);

    it('the stream holds operations, not documents: a large document rewritten is kept once, and every copy gets its last version', async () => {
      const writer = DocumentIndex.open(':memory:');
      const reader = DocumentIndex.open(':memory:');
      const replicas = await Promise.all(
        [writer, reader].map((index) => IndexReplication.open(redis.url, index, { streamLength: 1000 })),
      );
      try {
        const first = (await client.xrevrange('onnx-gateway:index:stream', '+', '-', 'COUNT', 1))[0]?.[0] ?? '0';
        const large = (version: number) => `version ${version} `.repeat(40_000);
        const dense = { model: 'm', dimensions: 2, data: new Float32Array([0.6, 0.8]) };
        for (let version = 1; version <= 3; version++)
          await replicas[0]!.upsert([doc('big', large(version))], { dense });
        const entries = (await client.xrange('onnx-gateway:index:stream', `(${first}`, '+')).map(
          ([, fields]) => fields[fields.indexOf('operation') + 1]!,
        );
        expect(entries).toHaveLength(3);
        for (const operation of entries) expect(JSON.parse(operation)).toEqual({ op: 'upsert-stored', keys: ['big'] });
        // One copy of the document in Redis, its last version.
        expect(await client.hexists('onnx-gateway:index:documents', 'big')).toBe(1);
        expect(await client.hstrlen('onnx-gateway:index:documents', 'big')).toBeLessThan(large(3).length * 1.1);
        await until(() => reader.applied()?.sequence === writer.applied()?.sequence);
        const id = reader.idsOf(['big']).get('big')!;
        expect(reader.documents([id]).get(id)!.text).toBe(large(3));
        expect(reader.vectorCount('m')).toBe(1);
        // A delete drops it from Redis too.
        expect(await replicas[0]!.remove('big')).toBe(true);
        await until(() => reader.applied()?.sequence === writer.applied()?.sequence);
        expect(reader.idsOf(['big']).size).toBe(0);
        expect(await client.hexists('onnx-gateway:index:documents', 'big')).toBe(0);
      } finally {
        await Promise.all(replicas.map((r) => r.close()));
        writer.close();
        reader.close();
      }
    });

    it('a write while Redis is away is 503 store_unavailable, and nothing is written', async () => {
      const index = DocumentIndex.open(':memory:');
      const replication = await IndexReplication.open(redis.url, index, { streamLength: 1000 });
      await redis.stop();
      try {
        await expect(replication.upsert([doc('z', 'zebras')])).rejects.toMatchObject({
          code: 'store_unavailable',
          status: 503,
        });
        expect(index.idsOf(['z']).size).toBe(0);
      } finally {
        await replication.close();
        index.close();
      }
    }, 60_000);
  },
);
