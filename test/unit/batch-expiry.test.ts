/**
 * Expiry on one server (SQLite records), on a clock the test moves: files uploaded with
 * `expires_after` are deleted by the sweep once their time has come (not while a running batch
 * reads one), and a batch past its completion window ends `expired`, the requests it did not
 * reach answered `batch_expired`, whether it was waiting for its turn or running.
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { BatchService } from '../../src/batch/service.js';
import type { BatchRecord, EndpointRunner } from '../../src/batch/types.js';
import type { CoreContext } from '../../src/core/context.js';
import { ApiError } from '../../src/errors.js';

const core = { scheduler: { submit: () => Promise.reject(new Error('not used')) } } as unknown as CoreContext;
const day = 24 * 3600;

let now = 1_800_000_000;
const clock = () => now;
let service: BatchService | undefined;
afterEach(async () => {
  await service?.close();
  service = undefined;
});

/** A runner that answers once `release` is called: requests stay running until then. */
function gatedRunner() {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const started = { count: 0 };
  const runner: EndpointRunner = async (_core, body) => {
    started.count += 1;
    await gate;
    return { ok: true, status: 200, body: JSON.stringify({ echo: (body as { input: string }).input }) };
  };
  return { runner, release, started };
}

function open(runner: EndpointRunner) {
  const dataDir = mkdtempSync(join(tmpdir(), 'onnx-gateway-batch-expiry-'));
  service = BatchService.open(
    core,
    new Map([['/v1/embeddings', runner]]),
    {
      dataDir,
      filesDir: join(dataDir, 'files'),
      fileMaxMb: 1,
      batchMaxRequests: 100,
      batchConcurrency: 1,
      batchInFlight: 2,
    },
    undefined,
    clock,
  );
  return service;
}

const requests = (prefix: string, count: number) =>
  Array.from({ length: count }, (_, i) =>
    JSON.stringify({ custom_id: `${prefix}-${i}`, method: 'POST', url: '/v1/embeddings', body: { input: `t${i}` } }),
  ).join('\n') + '\n';

async function upload(batches: BatchService, text: string, seconds?: number) {
  const received = await batches.receive(Readable.from([Buffer.from(text)]));
  return batches.register(
    'o',
    received,
    'in.jsonl',
    'batch',
    seconds === undefined ? undefined : { anchor: 'created_at', seconds },
  );
}

async function ended(batches: BatchService, id: string): Promise<BatchRecord> {
  for (;;) {
    const batch = (await batches.batch('o', id))!;
    if (['completed', 'failed', 'expired', 'cancelled'].includes(batch.status)) return batch;
    await sleep(10);
  }
}

const lines = (batches: BatchService, fileId: string | null) =>
  fileId === null
    ? []
    : readFileSync(batches.storage.path(fileId), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { custom_id: string; error: { code: string } | null });

describe('file expiry', () => {
  it('deletes a file at its expires_at, keeps the others, and keeps one a running batch reads', async () => {
    const { runner, release } = gatedRunner();
    const batches = open(runner);
    const expiring = await upload(batches, requests('a', 2), 3600);
    const kept = await upload(batches, requests('b', 2));
    const read = await upload(batches, requests('c', 2), 3600);
    expect([expiring.expiresAt, kept.expiresAt]).toEqual([now + 3600, null]);
    const running = await batches.create('o', {
      inputFileId: read.id,
      endpoint: '/v1/embeddings',
      completionWindow: '24h',
    });

    now += 3599;
    await batches.sweep();
    expect(await batches.file('o', expiring.id)).toBeDefined();
    now += 1;
    await batches.sweep();
    expect(await batches.file('o', expiring.id)).toBeUndefined();
    expect(existsSync(batches.storage.path(expiring.id))).toBe(false);
    expect(await batches.file('o', kept.id)).toBeDefined();
    // The running batch's input outlives its time until the batch ends.
    expect(await batches.file('o', read.id)).toBeDefined();
    release();
    expect((await ended(batches, running.id)).status).toBe('completed');
    await batches.sweep();
    expect(await batches.file('o', read.id)).toBeUndefined();
  });

  it('refuses an expiry policy OpenAI refuses, keeping nothing', async () => {
    const batches = open(gatedRunner().runner);
    const received = await batches.receive(Readable.from([Buffer.from(requests('a', 1))]));
    await expect(
      batches.register('o', received, 'in.jsonl', 'batch', { anchor: 'created_at', seconds: 60 }),
    ).rejects.toMatchObject({ code: 'invalid_request', param: 'expires_after.seconds' } satisfies Partial<ApiError>);
    expect(existsSync(batches.storage.path(received.id))).toBe(false);
    await expect(
      batches.register('o', await batches.receive(Readable.from([Buffer.from('x')])), 'x', 'batch', {
        anchor: 'last_active_at',
        seconds: 3600,
      }),
    ).rejects.toMatchObject({ param: 'expires_after.anchor' });
  });
});

describe('batch expiry', () => {
  it('ends a waiting batch and a running one expired, with batch_expired for each request not run', async () => {
    const { runner, release, started } = gatedRunner();
    const batches = open(runner);
    const created = now;
    const running = await batches.create('o', {
      inputFileId: (await upload(batches, requests('r', 5))).id,
      endpoint: '/v1/embeddings',
      completionWindow: '24h',
      outputExpiresAfter: { anchor: 'created_at', seconds: 7200 },
    });
    // batchConcurrency 1: this one waits for its turn behind the running batch.
    const waiting = await batches.create('o', {
      inputFileId: (await upload(batches, requests('w', 3))).id,
      endpoint: '/v1/embeddings',
      completionWindow: '24h',
    });
    expect(running.expiresAt).toBe(created + day);
    // batchInFlight 2: two requests of the running batch are in flight when its window ends.
    while (started.count < 2) await sleep(10);
    now = created + day;
    await batches.sweep();
    const late = await ended(batches, waiting.id);
    expect(late).toMatchObject({ status: 'expired', expiredAt: now, completed: 0, failed: 3, outputFileId: null });
    expect(lines(batches, late.errorFileId).map((l) => [l.custom_id, l.error?.code])).toEqual(
      ['w-0', 'w-1', 'w-2'].map((id) => [id, 'batch_expired']),
    );

    // The running batch: its two requests in flight are answered, the rest expire.
    expect((await batches.batch('o', running.id))!.status).toBe('in_progress');
    release();
    const cut = await ended(batches, running.id);
    expect(cut).toMatchObject({ status: 'expired', expiredAt: now, completed: 2, failed: 3 });
    expect(lines(batches, cut.outputFileId).map((l) => l.custom_id)).toEqual(['r-0', 'r-1']);
    expect(lines(batches, cut.errorFileId).map((l) => [l.custom_id, l.error?.code])).toEqual(
      ['r-2', 'r-3', 'r-4'].map((id) => [id, 'batch_expired']),
    );
    // output_expires_after: the result files expire 2 hours after they were made.
    expect((await batches.file('o', cut.outputFileId!))!.expiresAt).toBe(now + 7200);
    expect((await batches.file('o', late.errorFileId!))!.expiresAt).toBeNull();
    now += 7200;
    await batches.sweep();
    expect(await batches.file('o', cut.outputFileId!)).toBeUndefined();
    expect(await batches.file('o', cut.errorFileId!)).toBeUndefined();
    expect(await batches.file('o', late.errorFileId!)).toBeDefined();
  });
});
