/**
 * Clients do not retry what can not succeed: permanent server errors (501 for an operation not
 * served) carry `x-should-retry: false`, the OpenAI SDK's header, which it obeys before its rule of
 * retrying every 5xx; answers worth retrying keep their Retry-After and no such header.
 */
import Fastify from 'fastify';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../../src/errors.js';
import { registerErrorHandling } from '../../src/http/errors.js';
import { startFakeApp, type FakeApp } from '../helpers/fake-core.js';
import { auth, testKey } from '../helpers/server.js';
import type { ErrorBody } from '../helpers/bodies.js';

let server: FakeApp;
let origin: string;
beforeAll(async () => {
  server = await startFakeApp();
  origin = await server.app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(() => server?.close());

describe('x-should-retry', () => {
  it.each(['/v1/chat/completions', '/v1/audio/speech', '/api/chat'])('is false on the 501 of %s', async (url) => {
    const res = await server.app.inject({ method: 'POST', url, headers: auth, payload: { model: 'x' } });
    expect(res.statusCode).toBe(501);
    expect(res.headers['x-should-retry']).toBe('false');
  });

  it('makes the OpenAI SDK give up on a 501 after one request (it retried twice, about 1.3 s, without it)', async () => {
    const requests: string[] = [];
    const client = new OpenAI({
      apiKey: testKey,
      baseURL: `${origin}/v1`,
      fetch: (input: string | URL | Request, init?: RequestInit) => {
        requests.push(input instanceof Request ? input.url : input.toString());
        return fetch(input, init);
      },
    });
    const error = await client.chat.completions
      .create({ model: 'x', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(501);
    expect(requests).toHaveLength(1);
  });

  // A page's 5xx, which may recover, against its 404, which will not: test/http/reader.test.ts.
  it('is absent on client errors, which clients do not retry anyway', async () => {
    const invalid = await server.app.inject({
      method: 'POST',
      url: '/v1/embeddings',
      headers: auth,
      payload: { input: '' },
    });
    expect(invalid.statusCode).toBe(400);
    expect(invalid.headers['x-should-retry']).toBeUndefined();
  });
});

describe('retry-after', () => {
  // The layers below http/ say how long to wait in seconds; only http/ names the header.
  const app = Fastify();
  registerErrorHandling(app);
  app.get('/full', async () => {
    throw new ApiError('overloaded', 'The queue is full.', { retryAfterSeconds: 7 });
  });
  app.get('/too-large', async () => {
    throw new ApiError('insufficient_memory', 'Larger than the budget.', { permanent: true });
  });
  afterAll(() => app.close());

  it("is the error's seconds to wait, beside the catalogue's status", async () => {
    const res = await app.inject({ method: 'GET', url: '/full' });
    expect(res.statusCode).toBe(429);
    expect(res.headers['retry-after']).toBe('7');
    expect(res.json<ErrorBody>().error).toMatchObject({ code: 'overloaded', message: 'The queue is full.' });
  });

  it('is absent where no wait helps, and a permanent 5xx says not to retry', async () => {
    const res = await app.inject({ method: 'GET', url: '/too-large' });
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBeUndefined();
    expect(res.headers['x-should-retry']).toBe('false');
  });
});
