/**
 * Graceful shutdown of the real command (`node dist/cli/index.js serve`): on SIGTERM the server stops
 * accepting connections, answers requests that still arrive on open connections with 503
 * `shutting_down`, finishes the request in flight, closes the pool and exits 0.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ErrorBody } from '../helpers/bodies.js';
import { spawnTinyServer, type ServerProcess } from '../helpers/server-process.js';

/** Connects ('connected'), or resolves with the error code when the connection is refused. */
function tryConnect(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });
}

/** Everything the server sends on a raw socket until it closes it. */
function readAll(socket: Socket): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('close', () => resolve(Buffer.concat(chunks).toString()));
  });
}

describe('SIGTERM', () => {
  let dataDir: string;
  let server: ServerProcess;

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'onnx-gateway-shutdown-'));
    // One worker running one input at a time, so the large request below takes a while.
    server = spawnTinyServer(dataDir, { ONNX_GATEWAY_API_KEYS: '', ONNX_GATEWAY_MAX_BATCH_SIZE: '1' });
  });
  afterAll(async () => {
    if (server?.child.exitCode === null) server.child.kill('SIGKILL');
    await rm(dataDir, { recursive: true, force: true });
  });

  it('finishes the request in flight, refuses new connections and exits 0', async () => {
    const listening = await server.waitFor((line) => /^Server listening at /.test(line.msg));
    const base = /(http:\/\/[\d.]+:\d+)/.exec(listening.msg)![1]!;
    const port = Number(new URL(base).port);
    await server.waitFor((line) => line.msg === 'models warm: ready');

    // A second client has started a request before the signal: its connection is not idle, so it
    // stays open, and the rest of its request arrives while the server drains.
    const late = connect({ port, host: '127.0.0.1' });
    await new Promise((resolve) => late.once('connect', resolve));
    const lateResponse = readAll(late);
    late.write('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n');

    const inputs = Array.from(
      { length: 2048 },
      (_, i) => `input ${i}: ${'a few words repeated to make a long input '.repeat(12)}`,
    );
    const inFlight = fetch(`${base}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'in-flight' },
      body: JSON.stringify({ model: 'tiny-embedder', input: inputs }),
    });
    await server.waitFor((line) => line.reqId === 'in-flight' && line.msg === 'incoming request');
    server.child.kill('SIGTERM');
    await server.waitFor((line) => line.msg === 'shutting down: draining in-flight requests');

    // The listening socket closes as the drain begins.
    let attempt = 'connected';
    for (let i = 0; i < 200 && attempt === 'connected'; i++) {
      attempt = await tryConnect(port);
      if (attempt === 'connected') await sleep(10);
    }
    expect(attempt).toBe('ECONNREFUSED');

    late.write('\r\n');
    const lateText = await lateResponse;
    expect(lateText).toMatch(/^HTTP\/1\.1 503 /);
    expect(lateText.toLowerCase()).toContain('connection: close');
    expect((JSON.parse(lateText.slice(lateText.indexOf('\r\n\r\n') + 4)) as ErrorBody).error.code).toBe(
      'shutting_down',
    );

    const response = await inFlight;
    expect(response.status).toBe(200);
    const body = (await response.json()) as { data: { index: number; embedding: number[] }[] };
    expect(body.data).toHaveLength(inputs.length);
    expect(body.data.map((item) => item.index)).toEqual(inputs.map((_, i) => i));
    for (const item of body.data) expect(item.embedding).toHaveLength(32);

    expect(await server.exited).toBe(0);
    // The request was still running when the drain began: it completed after the signal.
    const draining = server.indexOf((line) => line.msg === 'shutting down: draining in-flight requests');
    const completed = server.indexOf((line) => line.reqId === 'in-flight' && line.msg === 'request completed');
    expect(completed).toBeGreaterThan(draining);
  });
});
