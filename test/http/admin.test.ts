/**
 * Admin keys: ordinary API keys that may also manage the server. A route that manages it (POST
 * /api/pull) refuses other keys with 403 before reading the body; without any keys (loopback only)
 * every request may, as with Ollama. Nothing here reaches a Hub: every pull is refused first.
 */
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { apiKeyAuth, requireAdmin } from '../../src/http/auth.js';
import { registerErrorHandling } from '../../src/http/errors.js';
import type { OllamaError } from '../helpers/bodies.js';
import { useFakeApp } from '../helpers/fake-core.js';
import { auth } from '../helpers/server.js';

const adminKey = 'admin-key-0123456789';
const admin = { authorization: `Bearer ${adminKey}` };
// Were a pull to get past its checks, it would find no Hub here rather than reach the network.
const noHub = { hfEndpoint: 'http://127.0.0.1:9' };

describe('with API keys and admin keys', () => {
  const { post, app } = useFakeApp({ ...noHub, adminKeys: [adminKey] });

  it('refuses an ordinary key on an admin route with 403 forbidden, before validating the body', async () => {
    for (const body of [{ model: 'BAAI/bge-small-en-v1.5' }, {}]) {
      const res = await post('/api/pull', body);
      expect(res.statusCode).toBe(403);
      expect(res.json<OllamaError>()).toEqual({
        error: expect.stringMatching(/needs an admin key \(ONNX_GATEWAY_ADMIN_KEYS\)/) as unknown,
        code: 'forbidden',
      });
    }
    expect((await post('/api/pull', { model: 'BAAI/bge-small-en-v1.5' }, {})).statusCode).toBe(401);
    expect(
      (await post('/api/pull', { model: 'BAAI/bge-small-en-v1.5' }, { authorization: 'Bearer wrong' })).statusCode,
    ).toBe(401);
  });

  it('lets an admin key in there, and on every other route', async () => {
    // In, then refused by pullAllow (empty by default), which the answer names.
    const refused = await post('/api/pull', { model: 'BAAI/bge-small-en-v1.5' }, admin);
    expect(refused.statusCode).toBe(403);
    expect(refused.json<OllamaError>().error).toMatch(
      /BAAI\/bge-small-en-v1.5 can not be pulled here: .*ONNX_GATEWAY_PULL_ALLOW is empty/,
    );
    expect((await post('/api/pull', {}, admin)).json<OllamaError>()).toEqual({
      error: expect.stringMatching(/^model is required/) as unknown,
      code: 'invalid_request',
    });
    expect((await post('/api/pull', { model: 'not a repository' }, admin)).statusCode).toBe(400);
    expect((await post('/v1/embeddings', { input: 'a' }, admin)).statusCode).toBe(200);
    expect((await app().inject({ method: 'GET', url: '/v1/models', headers: admin })).statusCode).toBe(200);
    expect((await post('/v1/embeddings', { input: 'a' }, auth)).statusCode).toBe(200);
  });
});

describe('requireAdmin on a route of the catalogue shape', () => {
  it('answers 403 with code forbidden for an ordinary key, and lets an admin key through', async () => {
    const app = Fastify();
    registerErrorHandling(app);
    await app.register(apiKeyAuth, { keys: ['user-key', adminKey], adminKeys: [adminKey] });
    app.post('/v1/manage', { onRequest: requireAdmin }, (request) => ({ admin: request.isAdmin }));
    try {
      const refused = await app.inject({
        method: 'POST',
        url: '/v1/manage',
        headers: { authorization: 'Bearer user-key' },
        payload: {},
      });
      expect(refused.statusCode).toBe(403);
      const error = {
        message: expect.stringMatching(/admin key/) as unknown,
        type: 'permission_error',
        param: null,
        code: 'forbidden',
      };
      expect(refused.json()).toEqual({ error });
      const allowed = await app.inject({ method: 'POST', url: '/v1/manage', headers: admin, payload: {} });
      expect(allowed.json()).toEqual({ admin: true });
    } finally {
      await app.close();
    }
  });
});

describe('with API keys and no admin keys', () => {
  const { post } = useFakeApp({ ...noHub, pullAllow: ['*'] });

  it('lets no key manage the server', async () => {
    const res = await post('/api/pull', { model: 'BAAI/bge-small-en-v1.5' });
    expect(res.statusCode).toBe(403);
    expect(res.json<OllamaError>().error).toMatch(/admin key/);
  });
});

describe('without any keys (loopback only)', () => {
  const { post } = useFakeApp({ ...noHub, apiKeys: [], pullAllow: ['BAAI'] });

  it('lets every request manage the server, as Ollama does; pullAllow still applies', async () => {
    const res = await post('/api/pull', { model: 'intfloat/e5-small-v2' }, {});
    expect(res.statusCode).toBe(403);
    expect(res.json<OllamaError>().error).toMatch(
      /intfloat\/e5-small-v2 can not be pulled here: ONNX_GATEWAY_PULL_ALLOW \(BAAI\) does not name it/,
    );
    expect((await post('/api/pull', {}, {})).statusCode).toBe(400);
  });
});
