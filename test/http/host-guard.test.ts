/**
 * Keyless mode is loopback in fact: requests addressed to another name (DNS rebinding) and browser
 * requests from another site get 403, ONNX_GATEWAY_ALLOWED_HOSTS widens the names; with keys, CORS
 * is off unless ONNX_GATEWAY_CORS_ORIGINS names origins.
 */
import { describe, expect, it } from 'vitest';
import type { ErrorBody } from '../helpers/bodies.js';
import { useFakeApp } from '../helpers/fake-core.js';
import { auth } from '../helpers/server.js';

const embed = { method: 'POST' as const, url: '/v1/embeddings', payload: { input: 'hi' } };

describe('without API keys', () => {
  const { app } = useFakeApp({ apiKeys: [], allowedHosts: ['gateway.lan'], corsOrigins: ['https://app.example'] });

  it.each([
    'localhost',
    'localhost:8080',
    'LOCALHOST:1',
    '127.0.0.1:8080',
    '127.9.8.7',
    '[::1]:8080',
    '[::1]',
    'gateway.lan:8080',
  ])('answers Host %s', async (host) => {
    const res = await app().inject({ ...embed, headers: { host } });
    expect(res.statusCode).toBe(200);
  });

  it.each([
    'attacker.example',
    'attacker.example:8080',
    'localhost.attacker.example',
    '10.0.0.5:8080',
    '[::2]:8080',
    '0.0.0.0:8080',
  ])('refuses Host %s with 403', async (host) => {
    for (const request of [embed, { method: 'GET' as const, url: '/health' }]) {
      const res = await app().inject({ ...request, headers: { host } });
      expect(res.statusCode).toBe(403);
      expect(res.json<ErrorBody>().error).toMatchObject({ code: 'forbidden', type: 'permission_error' });
      expect(res.json<ErrorBody>().error.message).toContain('ONNX_GATEWAY_ALLOWED_HOSTS');
    }
  });

  it('refuses a page of another site, even with a loopback Host (a cross-origin POST needs no preflight)', async () => {
    for (const origin of ['https://attacker.example', 'null', 'http://localhost.attacker.example']) {
      const res = await app().inject({ ...embed, headers: { host: 'localhost:8080', origin } });
      expect(res.statusCode).toBe(403);
      expect(res.json<ErrorBody>().error.code).toBe('forbidden');
    }
    const boundary = 'x';
    const multipart = [
      `--${boundary}`,
      'content-disposition: form-data; name="prompt"',
      '',
      'upscale',
      `--${boundary}--`,
      '',
    ].join('\r\n');
    const edit = await app().inject({
      method: 'POST',
      url: '/v1/images/edits',
      headers: {
        host: '127.0.0.1:8080',
        origin: 'https://attacker.example',
        'content-type': `multipart/form-data; boundary=${boundary}`,
      },
      payload: multipart,
    });
    expect(edit.statusCode).toBe(403);
  });

  it('answers pages served from loopback, from the allowed names and from the CORS origins', async () => {
    for (const origin of [
      'http://localhost:8080',
      'http://127.0.0.1:3000',
      'http://[::1]:8080',
      'http://gateway.lan:8080',
      'https://app.example',
    ]) {
      const res = await app().inject({ ...embed, headers: { host: 'localhost:8080', origin } });
      expect(res.statusCode).toBe(200);
    }
  });
});

describe('with API keys', () => {
  const off = useFakeApp();
  const on = useFakeApp({ corsOrigins: ['https://app.example'] });

  it('admits any Host and Origin with the key, and sends no CORS headers when no origins are named', async () => {
    const res = await off
      .app()
      .inject({ ...embed, headers: { ...auth, host: 'gateway.example.com', origin: 'https://app.example' } });
    expect(res.statusCode).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
    const preflight = await off.app().inject({
      method: 'OPTIONS',
      url: '/v1/embeddings',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' },
    });
    expect(preflight.headers['access-control-allow-origin']).toBeUndefined();
  });

  it("answers the named origins' preflights and requests with CORS headers, and no other origin", async () => {
    const preflight = await on.app().inject({
      method: 'OPTIONS',
      url: '/v1/embeddings',
      headers: {
        origin: 'https://app.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type',
      },
    });
    expect(preflight.statusCode).toBe(204);
    expect(preflight.headers['access-control-allow-origin']).toBe('https://app.example');
    expect(preflight.headers['access-control-allow-headers']).toContain('authorization');
    const res = await on.app().inject({ ...embed, headers: { ...auth, origin: 'https://app.example' } });
    expect(res.statusCode).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBe('https://app.example');
    expect(res.headers['access-control-expose-headers']).toContain('x-request-id');
    const other = await on.app().inject({
      method: 'OPTIONS',
      url: '/v1/embeddings',
      headers: { origin: 'https://attacker.example', 'access-control-request-method': 'POST' },
    });
    expect(other.headers['access-control-allow-origin']).toBeUndefined();
    expect(other.headers['access-control-allow-methods']).toBeUndefined();
  });
});
