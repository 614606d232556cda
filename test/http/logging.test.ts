/**
 * The logs, with the server's own logger: one JSON object per line, request ids on every request
 * line, no API key, no input text unless ONNX_GATEWAY_LOG_BODIES asks for it, and what the
 * services log while they open, before the HTTP app exists.
 */
import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig, type Config } from '../../src/config.js';
import { createLogger, createServer, type Server } from '../../src/main.js';
import type { ErrorBody } from '../helpers/bodies.js';
import { hasRedisServer, REDIS_SKIP_REASON, startRedisServer } from '../helpers/redis-server.js';
import { missing } from '../helpers/resources.js';
import { testKey } from '../helpers/server.js';

const secretText = 'confidential-patient-note-7f3a';

/** A server whose log lines are kept in memory, as parsed JSON objects. */
async function loggedServer(
  settings: Partial<Record<keyof Config, unknown>>,
): Promise<{ server: Server; lines: () => Record<string, unknown>[]; raw: () => string }> {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  const config = loadConfig(
    {
      modelsDir: inject('tinyModelsDir'),
      models: ['tiny-embedder', 'tiny-reranker'],
      apiKeys: [testKey],
      host: '127.0.0.1',
      port: 0,
      workers: 1,
      logLevel: 'info',
      ...settings,
    },
    {},
  );
  const server = await createServer(config, createLogger(config, stream));
  await server.ready;
  const raw = () => chunks.join('');
  return {
    server,
    raw,
    lines: () =>
      raw()
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

describe('logs', () => {
  let logged: Awaited<ReturnType<typeof loggedServer>>;
  const headers = { authorization: `Bearer ${testKey}`, 'x-request-id': 'req-logging-1' };

  beforeAll(async () => {
    logged = await loggedServer({ logBodies: false });
    const { app } = logged.server;
    expect(
      (await app.inject({ method: 'POST', url: '/v1/embeddings', headers, payload: { input: [secretText] } }))
        .statusCode,
    ).toBe(200);
    expect(
      (
        await app.inject({
          method: 'POST',
          url: '/v1/rerank',
          headers,
          payload: { query: secretText, documents: [secretText] },
        })
      ).statusCode,
    ).toBe(200);
    // Errors about the body: bad JSON (whose parser message quotes the text), a wrong field, an unknown model.
    const badJson = await app.inject({
      method: 'POST',
      url: '/v1/embeddings',
      headers: { ...headers, 'content-type': 'application/json' },
      payload: `{"input": "${secretText}"`,
    });
    expect(badJson.statusCode).toBe(400);
    expect(
      (
        await app.inject({
          method: 'POST',
          url: '/v1/embeddings',
          headers,
          payload: { input: secretText, dimensions: 'many' },
        })
      ).statusCode,
    ).toBe(400);
    expect(
      (
        await app.inject({
          method: 'POST',
          url: '/v1/embeddings',
          headers,
          payload: { input: secretText, model: secretText },
        })
      ).statusCode,
    ).toBe(404);
    // A wrong key is not logged either.
    expect(
      (
        await app.inject({
          method: 'POST',
          url: '/v1/embeddings',
          headers: { authorization: `Bearer ${secretText}` },
          payload: { input: 'x' },
        })
      ).statusCode,
    ).toBe(401);
  });
  afterAll(() => logged?.server.close());

  it('writes one JSON object per line with a level, a time and a message', () => {
    const lines = logged.lines();
    expect(lines.length).toBeGreaterThanOrEqual(12);
    for (const line of lines) {
      expect(typeof line.level).toBe('number');
      expect(typeof line.time).toBe('number');
      expect(typeof line.msg).toBe('string');
    }
  });

  it("tags every request line with the request id, the client's own when it sent one", () => {
    const lines = logged.lines().filter((line) => line.req !== undefined || line.res !== undefined);
    expect(lines.length).toBeGreaterThanOrEqual(12);
    for (const line of lines) expect(typeof line.reqId).toBe('string');
    const mine = lines.filter((line) => line.reqId === 'req-logging-1');
    expect(mine.map((line) => line.msg)).toEqual(expect.arrayContaining(['incoming request', 'request completed']));
  });

  it('has the detail of a refused reader address, which the answer leaves out', async () => {
    const res = await logged.server.app.inject({
      method: 'POST',
      url: '/v1/web-reader/read',
      headers: { ...headers, 'x-request-id': 'req-reader-1' },
      payload: { url: 'http://10.1.2.3:8080/admin' },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json<ErrorBody>().error.message).not.toContain('10.1.2.3');
    const line = logged.lines().find((entry) => entry.reqId === 'req-reader-1' && typeof entry.detail === 'string');
    expect(line?.detail).toMatch(/^10\.1\.2\.3:8080: /);
  });

  it('never contains an API key or an input text', () => {
    const raw = logged.raw();
    expect(raw).toContain('/v1/embeddings');
    expect(raw).not.toContain(testKey);
    expect(raw).not.toContain(secretText);
  });
});

describe('ONNX_GATEWAY_LOG_BODIES', () => {
  it('logs request bodies when asked to, and still no key', async () => {
    const logged = await loggedServer({ logBodies: true });
    try {
      const res = await logged.server.app.inject({
        method: 'POST',
        url: '/v1/embeddings',
        headers: { authorization: `Bearer ${testKey}` },
        payload: { input: [secretText] },
      });
      expect(res.statusCode).toBe(200);
      const bodyLine = logged.lines().find((line) => line.msg === 'request body');
      expect(bodyLine?.body).toMatchObject({ input: [secretText] });
      expect(typeof bodyLine?.reqId).toBe('string');
      expect(logged.raw()).not.toContain(testKey);
    } finally {
      await logged.server.close();
    }
  });
});

describe.skipIf(missing(hasRedisServer, REDIS_SKIP_REASON))(
  `start-up logs${hasRedisServer ? '' : ` (skipped: ${REDIS_SKIP_REASON})`}`,
  () => {
    it("logs the search service's error while it opens: a replica that can not catch up with the index stream", async () => {
      const dir = mkdtempSync(join(tmpdir(), 'onnx-gateway-startup-log-'));
      const redis = await startRedisServer(dir);
      const client = new Redis(redis.url);
      let logged: Awaited<ReturnType<typeof loggedServer>> | undefined;
      try {
        // The stream starts at entry 5 and there is no snapshot of 1 to 4: catching up fails, serving goes on.
        await client.xadd(
          'onnx-gateway:index:stream',
          '*',
          'sequence',
          '5',
          'operation',
          '{"op":"delete","keys":["x"]}',
        );
        logged = await loggedServer({ dataDir: dir, redisUrl: redis.url });
        const line = logged
          .lines()
          .find(
            (entry) => entry.msg === 'index replication: catching up with the stream failed; retrying while serving',
          );
        expect(line?.level).toBe(50);
        expect((line?.err as { message?: string } | undefined)?.message).toMatch(/no snapshot to load/);
      } finally {
        await logged?.server.close();
        client.disconnect();
        await redis.stop();
        await rm(dir, { recursive: true, force: true });
      }
    }, 60_000);
  },
);
