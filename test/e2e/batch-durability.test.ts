/**
 * A batch survives its server being killed: a real `serve` process is sent SIGKILL while a batch
 * runs, a new process on the same data dir resumes the batch at its start, and the output has
 * every custom_id exactly once, in input order.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { uploadEmbeddingRequests } from '../helpers/batch-files.js';
import { listeningUrl, spawnTinyServer, type ServerProcess } from '../helpers/server-process.js';

const key = 'durability-key-0123456789';
const servers: ServerProcess[] = [];
afterAll(() => {
  for (const server of servers) server.child.kill('SIGKILL');
});

function start(dataDir: string): ServerProcess {
  const server = spawnTinyServer(dataDir, { ONNX_GATEWAY_API_KEYS: key });
  servers.push(server);
  return server;
}

async function call<T>(base: string, method: string, path: string, body?: unknown): Promise<T> {
  const response = await fetch(`${base}/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  expect(response.status, `${method} ${path}`).toBe(200);
  return (await response.json()) as T;
}

interface Batch {
  id: string;
  status: string;
  output_file_id?: string;
  error_file_id?: string;
  request_counts: { total: number; completed: number; failed: number };
}

it('resumes a batch killed with SIGKILL and answers every request exactly once', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'onnx-gateway-batch-kill-'));
  const first = start(dataDir);
  const base = await listeningUrl(first);

  const count = 3000;
  const { ids, fileId } = await uploadEmbeddingRequests(base, key, count);
  const file = { id: fileId };
  const created = await call<Batch>(base, 'POST', '/batches', {
    input_file_id: file.id,
    endpoint: '/v1/embeddings',
    completion_window: '24h',
  });

  // Killed once some answers are committed and before the last: in the middle of the batch.
  let before: Batch;
  for (;;) {
    before = await call<Batch>(base, 'GET', `/batches/${created.id}`);
    if (before.request_counts.completed > 0) break;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  first.child.kill('SIGKILL');
  await first.exited;
  expect(before.status).toBe('in_progress');
  expect(before.request_counts.completed).toBeLessThan(count);

  const second = start(dataDir);
  const resumedBase = await listeningUrl(second);
  let after: Batch;
  for (;;) {
    after = await call<Batch>(resumedBase, 'GET', `/batches/${created.id}`);
    if (['completed', 'failed', 'cancelled', 'expired'].includes(after.status)) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  expect(after.status).toBe('completed');
  expect(after.request_counts).toEqual({ total: count, completed: count, failed: 0 });
  expect(after.error_file_id).toBeUndefined();

  const content = await fetch(`${resumedBase}/v1/files/${after.output_file_id}/content`, {
    headers: { authorization: `Bearer ${key}` },
  });
  const lines = (await content.text())
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { custom_id: string; response: { status_code: number } });
  expect(lines.map((line) => line.custom_id)).toEqual(ids);
  expect(lines.every((line) => line.response.status_code === 200)).toBe(true);
  expect(second.indexOf((line) => line.msg === 'batch resumed')).toBeGreaterThanOrEqual(0);
});
