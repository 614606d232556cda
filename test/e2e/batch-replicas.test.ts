/**
 * Two replicas share a batch through a real Redis (Debian's redis-server) and one files dir: a
 * batch created on one is readable on the other, its chunks run on both, and when one replica is
 * killed with SIGKILL in the middle of a chunk, that chunk runs again on the other; the output has
 * every custom_id exactly once, in input order.
 */
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { hasRedisServer, REDIS_SKIP_REASON, startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { missing } from '../helpers/resources.js';
import { uploadEmbeddingRequests } from '../helpers/batch-files.js';
import { listeningUrl, spawnTinyServer, type ServerProcess } from '../helpers/server-process.js';

const key = 'replicas-batch-key-0123456789';

interface Batch {
  id: string;
  status: string;
  output_file_id?: string;
  error_file_id?: string;
  request_counts: { total: number; completed: number; failed: number };
  usage: { input_tokens: number; total_tokens: number };
}

describe.skipIf(missing(hasRedisServer, REDIS_SKIP_REASON))(
  `a batch shared by two replicas through Redis${hasRedisServer ? '' : ` (skipped: ${REDIS_SKIP_REASON})`}`,
  () => {
    const servers: ServerProcess[] = [];
    let redis: RedisServer | undefined;
    afterAll(async () => {
      for (const server of servers) server.child.kill('SIGKILL');
      await redis?.stop();
    });

    async function call<T>(base: string, method: string, path: string, body?: unknown): Promise<T> {
      const response = await fetch(`${base}/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      expect(response.status, `${method} ${path}`).toBe(200);
      return (await response.json()) as T;
    }

    it('runs a killed replica’s chunk again on the other and answers every request exactly once', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'onnx-gateway-batch-replicas-'));
      const filesDir = join(dir, 'files');
      mkdirSync(filesDir);
      redis = await startRedisServer(dir);
      const start = (name: string) => {
        const server = spawnTinyServer(join(dir, name), {
          ONNX_GATEWAY_API_KEYS: key,
          ONNX_GATEWAY_REDIS_URL: redis!.url,
          ONNX_GATEWAY_FILES_DIR: filesDir,
          ONNX_GATEWAY_BATCH_CHUNK_LINES: '150',
          // A dead replica's chunk is taken back within about 3 s.
          ONNX_GATEWAY_BATCH_LOCK_SECONDS: '2',
          ONNX_GATEWAY_BATCH_IN_FLIGHT: '16',
        });
        servers.push(server);
        return server;
      };
      const [a, b] = [start('a'), start('b')];
      const [baseA, baseB] = await Promise.all([listeningUrl(a), listeningUrl(b)]);

      const count = 3000;
      const { ids, fileId } = await uploadEmbeddingRequests(baseA, key, count);
      const file = { id: fileId };
      // The file uploaded through one replica is the other's too.
      expect((await call<{ id: string }>(baseB, 'GET', `/files/${file.id}`)).id).toBe(file.id);
      const created = await call<Batch>(baseA, 'POST', '/batches', {
        input_file_id: file.id,
        endpoint: '/v1/embeddings',
        completion_window: '24h',
      });
      expect((await call<Batch>(baseB, 'GET', `/batches/${created.id}`)).id).toBe(created.id);

      // Killed once it has finished a chunk and while it runs another: in the middle of a chunk.
      const chunks = (server: ServerProcess, msg: string) =>
        server.lines
          .filter((line) => line.msg === msg && line.batch === created.id)
          .map((line) => line.chunk as number);
      for (;;) {
        const done = chunks(a, 'batch chunk done');
        if (done.length > 0 && chunks(a, 'batch chunk started').some((chunk) => !done.includes(chunk))) break;
        await sleep(5);
      }
      a.child.kill('SIGKILL');
      await a.exited;
      const before = await call<Batch>(baseB, 'GET', `/batches/${created.id}`);
      expect(before.status).toBe('in_progress');
      expect(before.request_counts.completed).toBeLessThan(count);

      let after: Batch;
      for (;;) {
        after = await call<Batch>(baseB, 'GET', `/batches/${created.id}`);
        if (['completed', 'failed', 'cancelled', 'expired'].includes(after.status)) break;
        await sleep(100);
      }
      expect(after.status).toBe('completed');
      expect(after.request_counts).toEqual({ total: count, completed: count, failed: 0 });
      expect(after.error_file_id).toBeUndefined();
      // A chunk the killed replica held was run again by the other (log lines come in blocks, and
      // the killed replica's last ones are lost: any chunk it started counts).
      const startedOnA = new Set(chunks(a, 'batch chunk started'));
      await b.waitFor(
        (line) => line.msg === 'batch chunk done' && line.batch === created.id && startedOnA.has(line.chunk as number),
      );

      const content = await fetch(`${baseB}/v1/files/${after.output_file_id}/content`, {
        headers: { authorization: `Bearer ${key}` },
      });
      const lines = (await content.text())
        .split('\n')
        .filter(Boolean)
        .map(
          (line) =>
            JSON.parse(line) as {
              custom_id: string;
              response: { status_code: number; body: { usage: { prompt_tokens: number } } };
            },
        );
      expect(lines.map((line) => line.custom_id)).toEqual(ids);
      expect(lines.every((line) => line.response.status_code === 200)).toBe(true);
      // Each chunk's tokens counted once, the chunk run again on the other replica included.
      const tokens = lines.reduce((sum, line) => sum + line.response.body.usage.prompt_tokens, 0);
      expect(after.usage).toMatchObject({ input_tokens: tokens, total_tokens: tokens });
    });
  },
);
