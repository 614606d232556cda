/**
 * request.clientSignal: not aborted while the client waits (fastify's request.signal is, when the
 * handler asks for it before Node emits the request's 'close' after reading the body), aborted
 * when the client goes away before its answer.
 */
import { request as httpRequest } from 'node:http';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientSignal } from '../../src/http/client-signal.js';

describe('request.clientSignal', () => {
  let app: FastifyInstance;
  let url: string;
  const seen: Array<{ abortedAtStart: boolean; aborted: Promise<boolean> }> = [];

  beforeAll(async () => {
    app = Fastify();
    await app.register(clientSignal);
    // No async hook before the handler: it reads the signal in the tick the body was read.
    app.post('/wait', (request, reply) => {
      const signal = request.clientSignal;
      const aborted = new Promise<boolean>((resolve) => {
        signal.addEventListener('abort', () => resolve(true), { once: true });
        setTimeout(() => resolve(signal.aborted), 300);
      });
      seen.push({ abortedAtStart: signal.aborted, aborted });
      void aborted.then((gone) => {
        if (!gone) void reply.send({ ok: true });
      });
    });
    url = await app.listen({ port: 0, host: '127.0.0.1' });
  });

  afterAll(() => app.close());

  it('stays unaborted while the client waits for its answer', async () => {
    const res = await fetch(`${url}/wait`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"a":1}',
    });
    expect(res.status).toBe(200);
    const last = seen.at(-1)!;
    expect(last.abortedAtStart).toBe(false);
    expect(await last.aborted).toBe(false);
  });

  it('aborts when the client goes away before its answer', async () => {
    const before = seen.length;
    await new Promise<void>((resolve) => {
      const req = httpRequest(`${url}/wait`, { method: 'POST', headers: { 'content-type': 'application/json' } });
      req.on('error', () => resolve());
      req.end('{"a":1}');
      // Gone once the server has the request and before its answer.
      setTimeout(() => {
        req.destroy();
        resolve();
      }, 100);
    });
    await expect.poll(() => seen.length).toBe(before + 1);
    expect(await seen.at(-1)!.aborted).toBe(true);
  });
});
