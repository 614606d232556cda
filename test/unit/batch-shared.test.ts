/**
 * Batches shared through a real Redis (Debian's redis-server, started here), their services in
 * this process on a clock the test moves and a runner the test holds: files expire and are swept,
 * a batch whose window ends mid-run answers its chunks not yet run with `batch_expired`, a chunk
 * whose job BullMQ gives up on has its requests answered `request_failed` while the batch ends,
 * and a replica that shuts down puts its running chunk back in the queue for another.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue, type Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { chunkQueueName, SharedBatchService } from '../../src/batch/shared.js';
import type { BatchRecord, EndpointRunner } from '../../src/batch/types.js';
import type { CoreContext } from '../../src/core/context.js';
import { hasRedisServer, REDIS_SKIP_REASON, startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { missing } from '../helpers/resources.js';

const core = { scheduler: { submit: () => Promise.reject(new Error('not used')) } } as unknown as CoreContext;
const day = 24 * 3600;

/** A runner whose requests wait for `release` (or their abort): chunks stay running until then. */
function gatedRunner() {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const started = { count: 0 };
  const runner: EndpointRunner = async (_core, body, signal) => {
    started.count += 1;
    await Promise.race([
      gate,
      new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error))),
    ]);
    return { ok: true, status: 200, body: JSON.stringify({ echo: (body as { input: string }).input }) };
  };
  return { runner, release, started };
}

const answering: EndpointRunner = (_core, body) =>
  Promise.resolve({ ok: true, status: 200, body: JSON.stringify({ echo: (body as { input: string }).input }) });

const requests = (count: number) =>
  Array.from({ length: count }, (_, i) =>
    JSON.stringify({ custom_id: `id-${i}`, method: 'POST', url: '/v1/embeddings', body: { input: `t${i}` } }),
  ).join('\n') + '\n';

describe.skipIf(missing(hasRedisServer, REDIS_SKIP_REASON))(
  `batches shared through Redis${hasRedisServer ? '' : ` (skipped: ${REDIS_SKIP_REASON})`}`,
  () => {
    let dir: string;
    let server: RedisServer;
    let redis: Redis;
    let filesDir: string;
    const open: SharedBatchService[] = [];
    let now = 1_800_000_000;
    const clock = () => now;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'onnx-gateway-batch-shared-'));
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
      filesDir = mkdtempSync(join(dir, 'files-'));
    });
    afterEach(async () => {
      await Promise.all(open.splice(0).map((service) => service.close()));
    });

    async function start(runner: EndpointRunner) {
      const service = await SharedBatchService.open(
        server.url,
        core,
        new Map([['/v1/embeddings', runner]]),
        {
          dataDir: dir,
          filesDir,
          fileMaxMb: 1,
          batchMaxRequests: 100,
          batchConcurrency: 1,
          batchInFlight: 2,
          batchChunkLines: 3,
          batchLockSeconds: 30,
        },
        undefined,
        clock,
      );
      open.push(service);
      return service;
    }

    async function batchOf(service: SharedBatchService, count: number, expiresAfter?: number) {
      const received = await service.receive(Readable.from([Buffer.from(requests(count))]));
      const file = await service.register(
        'o',
        received,
        'in.jsonl',
        'batch',
        expiresAfter === undefined ? undefined : { anchor: 'created_at', seconds: expiresAfter },
      );
      return {
        file,
        batch: await service.create('o', { inputFileId: file.id, endpoint: '/v1/embeddings', completionWindow: '24h' }),
      };
    }

    async function ended(service: SharedBatchService, id: string): Promise<BatchRecord> {
      for (;;) {
        const batch = (await service.batch('o', id))!;
        if (['completed', 'failed', 'expired', 'cancelled'].includes(batch.status)) return batch;
        await sleep(20);
      }
    }

    const lines = (service: SharedBatchService, fileId: string | null) =>
      fileId === null
        ? []
        : readFileSync(service.storage.path(fileId), 'utf8')
            .split('\n')
            .filter(Boolean)
            .map((line) => JSON.parse(line) as { custom_id: string; error: { code: string } | null });

    it('sweeps expired files (not one a running batch reads) and expires the chunks not run by the window', async () => {
      const { runner, release, started } = gatedRunner();
      const service = await start(runner);
      const spare = await service.register(
        'o',
        await service.receive(Readable.from([Buffer.from(requests(1))])),
        'spare.jsonl',
        'batch',
        { anchor: 'created_at', seconds: 3600 },
      );
      const { file, batch } = await batchOf(service, 6, 3600);
      expect(spare.expiresAt).toBe(now + 3600);
      while (started.count < 2) await sleep(10);
      now += day;
      await service.sweep();
      expect(await service.file('o', spare.id)).toBeUndefined();
      // Its batch still reads it.
      expect(await service.file('o', file.id)).toBeDefined();

      // Chunk 0 was running when the window ended and finishes; chunk 1 had not started.
      release();
      const done = await ended(service, batch.id);
      expect(done).toMatchObject({ status: 'expired', expiredAt: now, completed: 3, failed: 3 });
      expect(lines(service, done.outputFileId).map((l) => l.custom_id)).toEqual(['id-0', 'id-1', 'id-2']);
      expect(lines(service, done.errorFileId).map((l) => [l.custom_id, l.error?.code])).toEqual(
        ['id-3', 'id-4', 'id-5'].map((id) => [id, 'batch_expired']),
      );
      await service.sweep();
      expect(await service.file('o', file.id)).toBeUndefined();
      expect(await redis.zcard('onnx-gateway:batches:file-expiries')).toBe(0);
    });

    it('answers a chunk BullMQ gave up on with request_failed, and the batch still ends', async () => {
      const { runner, release, started } = gatedRunner();
      const service = await start(runner);
      const { batch } = await batchOf(service, 9);
      while (started.count < 2) await sleep(10);
      // Chunk 0 runs; chunks 1 and 2 wait. BullMQ's events for a job that lost its replica for the
      // last time, and for one that failed a try it will retry.
      const queue = new Queue(chunkQueueName, { connection: redis, prefix: 'onnx-gateway' });
      const worker = (service as unknown as { worker: Worker }).worker;
      const last = (await queue.getJob(`${batch.id}-1`))!;
      const retried = (await queue.getJob(`${batch.id}-2`))!;
      worker.emit('failed', last, new Error('job stalled more than allowable limit'), 'active');
      worker.emit('failed', retried, new Error('a try failed'), 'active');
      for (;;) {
        const results = await redis.hkeys(`onnx-gateway:batches:chunks:${batch.id}`);
        if (results.includes('1')) break;
        await sleep(10);
      }
      release();
      const done = await ended(service, batch.id);
      expect(done).toMatchObject({ status: 'completed', completed: 6, failed: 3 });
      expect(lines(service, done.outputFileId).map((l) => l.custom_id)).toEqual([
        'id-0',
        'id-1',
        'id-2',
        'id-6',
        'id-7',
        'id-8',
      ]);
      expect(lines(service, done.errorFileId).map((l) => [l.custom_id, l.error?.code])).toEqual(
        ['id-3', 'id-4', 'id-5'].map((id) => [id, 'request_failed']),
      );
      await queue.close();
    });

    it('puts a running chunk back in the queue on shutdown, and another replica completes the batch', async () => {
      const { runner, started } = gatedRunner();
      const first = await start(runner);
      const { batch } = await batchOf(first, 6);
      while (started.count < 2) await sleep(10);
      await first.close();
      const queue = new Queue(chunkQueueName, { connection: redis, prefix: 'onnx-gateway' });
      const job = (await queue.getJob(`${batch.id}-0`))!;
      expect(await job.getState()).toBe('waiting');
      expect(job.attemptsMade).toBe(0);
      expect(await redis.hlen(`onnx-gateway:batches:chunks:${batch.id}`)).toBe(0);
      await queue.close();

      const second = await start(answering);
      const done = await ended(second, batch.id);
      expect(done).toMatchObject({ status: 'completed', completed: 6, failed: 0 });
      expect(lines(second, done.outputFileId).map((l) => l.custom_id)).toEqual(
        Array.from({ length: 6 }, (_, i) => `id-${i}`),
      );
    });
  },
);
