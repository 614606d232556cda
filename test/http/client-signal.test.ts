/**
 * request.clientSignal: not aborted while the client waits (fastify's request.signal is, when the
 * handler asks for it before Node emits the request's 'close' after reading the body), aborted
 * when the client goes away before its answer; with a request timeout, aborted once the request's time is
 * up, and answered 504 `timeout`.
 */
import { request as httpRequest } from 'node:http';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../../src/errors.js';
import { clientSignal } from '../../src/http/client-signal.js';
import { registerErrorHandling } from '../../src/http/errors.js';
import type { ErrorBody } from '../helpers/bodies.js';

describe('request.clientSignal', () => {
  let app: FastifyInstance;
  let url: string;
  const seen: Array<{ abortedAtStart: boolean; aborted: Promise<boolean> }> = [];

  beforeAll(async () => {
    app = Fastify();
    await app.register(clientSignal, { timeoutMs: 0 });
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

describe('request.clientSignal with a request timeout', () => {
  let app: FastifyInstance;
  let url: string;

  beforeAll(async () => {
    app = Fastify();
    registerErrorHandling(app);
    await app.register(clientSignal, { timeoutMs: 100 });
    // Work that ends only when its signal aborts, refused then as the scheduler refuses a cancelled job.
    app.post('/forever', (request) => {
      const signal = request.clientSignal;
      return new Promise((_, reject) => {
        signal.addEventListener('abort', () => reject(new ApiError('client_closed')), { once: true });
      });
    });
    app.post('/quick', (request) => ({ aborted: request.clientSignal.aborted }));
    url = await app.listen({ port: 0, host: '127.0.0.1' });
  });

  afterAll(() => app.close());

  it('drops work that outlives it and answers 504 timeout, naming the setting', async () => {
    const res = await fetch(`${url}/forever`, { method: 'POST' });
    expect(res.status).toBe(504);
    const body = (await res.json()) as ErrorBody;
    expect(body.error.code).toBe('timeout');
    expect(body.error.message).toMatch(/requestTimeout/);
  });

  it('leaves work that ends in time alone, and each request of a connection has its own time', async () => {
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${url}/quick`, { method: 'POST' });
      expect(await res.json()).toEqual({ aborted: false });
    }
    // After a timed-out request, the next one on the same keep-alive connection starts afresh.
    expect((await fetch(`${url}/forever`, { method: 'POST' })).status).toBe(504);
    expect(await (await fetch(`${url}/quick`, { method: 'POST' })).json()).toEqual({ aborted: false });
  });
});
