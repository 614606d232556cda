/**
 * What the API refuses, and how: auth, request validation with the offending field named, the
 * error catalogue's answers to malformed requests, 501 for the operations not served, the body
 * limit, and the models list. None of it runs a model: the app is over a fake core
 * (test/helpers/fake-core.ts), so no worker thread starts.
 */
import { describe, expect, it } from 'vitest';
import type { ErrorBody, ModelList } from '../helpers/bodies.js';
import { startFakeApp, useFakeApp } from '../helpers/fake-core.js';
import { auth } from '../helpers/server.js';

const { app, post } = useFakeApp();

describe('auth', () => {
  it('refuses a missing key with 401 and WWW-Authenticate', async () => {
    const res = await post('/v1/embeddings', { input: 'hi' }, {});
    expect(res.statusCode).toBe(401);
    expect(res.headers['www-authenticate']).toBe('Bearer');
    expect(res.json<ErrorBody>().error.code).toBe('unauthorized');
  });
  it('refuses a wrong key', async () => {
    const res = await post('/v1/embeddings', { input: 'hi' }, { authorization: 'Bearer nope' });
    expect(res.statusCode).toBe(401);
  });
  it('keeps /health public', async () => {
    const res = await app().inject({ method: 'GET', url: '/health' });
    expect(res.statusCode).toBe(200);
    expect(res.json<{ status: string }>().status).toBe('ok');
  });
});

describe('POST /v1/embeddings', () => {
  it('refuses dimensions above the native width', async () => {
    const res = await post('/v1/embeddings', { input: 'x', dimensions: 33 });
    expect(res.statusCode).toBe(400);
    expect(res.json<ErrorBody>().error).toMatchObject({ code: 'invalid_request', param: 'dimensions' });
  });

  it.each([
    ['an empty string', { input: '' }, 'input[0]'],
    ['an empty array', { input: [] }, 'input'],
    ['an empty string in an array', { input: ['a', ''] }, 'input[1]'],
    ['a number', { input: 5 }, 'input'],
    ['mixed types', { input: ['a', 5] }, 'input'],
    ['a missing input', { model: 'tiny-embedder' }, 'input'],
    ['a wrong encoding_format', { input: 'a', encoding_format: 'hex' }, 'encoding_format'],
    ['a string dimensions', { input: 'a', dimensions: '8' }, 'dimensions'],
    ['a negative dimensions', { input: 'a', dimensions: -1 }, 'dimensions'],
    ['floats as token ids', { input: [1.5, 2] }, 'input'],
  ])('answers 400 with the field named for %s', async (_name, body, param) => {
    const res = await post('/v1/embeddings', body);
    expect(res.statusCode).toBe(400);
    const error = res.json<ErrorBody>().error;
    expect(error.code).toBe('invalid_request');
    expect(error.param).toBe(param);
    expect(typeof error.message).toBe('string');
  });

  it('refuses more inputs than the configured maximum', async () => {
    const res = await post('/v1/embeddings', { input: Array.from({ length: 2049 }, () => 'a') });
    expect(res.statusCode).toBe(400);
    expect(res.json<ErrorBody>().error.param).toBe('input');
  });

  it('answers 404 model_not_found for an unknown model, and 400 for a model of the wrong task', async () => {
    const res = await post('/v1/embeddings', { input: 'a', model: 'text-embedding-3-small' });
    expect(res.statusCode).toBe(404);
    expect(res.json<ErrorBody>().error).toMatchObject({ code: 'model_not_found', param: 'model' });
    const wrong = await post('/v1/embeddings', { input: 'a', model: 'tiny-reranker' });
    expect(wrong.statusCode).toBe(400);
  });

  it('answers a kind of output the model does not give with 400, naming the routes of the kinds it gives', async () => {
    const res = await post('/v1/embeddings', { input: 'a', model: 'tiny-embedder', encoding_format: 'sparse' });
    expect(res.statusCode).toBe(400);
    expect(res.json<ErrorBody>().error).toMatchObject({
      code: 'invalid_request',
      param: 'model',
      message:
        'The model "tiny-embedder" does not give sparse vectors; it gives dense (/v1/embeddings or /embed), ' +
        'tokens (/embed_all, or /v1/rerank for late interaction).',
    });
  });
});

describe('POST /v1/rerank', () => {
  it.each([
    ['an empty query', { query: '', documents: ['a'] }, 'query'],
    ['no documents', { query: 'q', documents: [] }, 'documents'],
    ['a missing query', { documents: ['a'] }, 'query'],
    ['a number document', { query: 'q', documents: [1] }, 'documents[0]'],
    ['a negative top_n', { query: 'q', documents: ['a'], top_n: -1 }, 'top_n'],
  ])('answers 400 for %s', async (_name, body, param) => {
    const res = await post('/v1/rerank', body);
    expect(res.statusCode).toBe(400);
    expect(res.json<ErrorBody>().error.param).toBe(param);
  });
});

describe('GET /v1/models', () => {
  it('lists every variant the registry serves (fp16 and the optimised graphs too)', async () => {
    const variants = await startFakeApp({}, (models) =>
      models.flatMap((model) =>
        model.task === 'embedding'
          ? (['fp32', 'fp16', 'O3'] as const).map((variant) => ({
              ...model,
              id: `${model.baseId}:${variant}`,
              variant,
            }))
          : [model],
      ),
    );
    try {
      const res = await variants.app.inject({ method: 'GET', url: '/v1/models', headers: auth });
      expect(res.statusCode).toBe(200);
      expect(res.json<ModelList>().data.map((m) => `${m.id} ${m.variant}`)).toEqual([
        'tiny-embedder:fp32 fp32',
        'tiny-embedder:fp16 fp16',
        'tiny-embedder:O3 O3',
        'tiny-reranker fp32',
      ]);
    } finally {
      await variants.close();
    }
  });
});

describe('errors', () => {
  it('answers malformed JSON with invalid_json', async () => {
    const res = await app().inject({
      method: 'POST',
      url: '/v1/embeddings',
      payload: '{"input": "a"',
      headers: { ...auth, 'content-type': 'application/json' },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json<ErrorBody>().error.code).toBe('invalid_json');
  });
  it('answers an empty JSON body with invalid_json where the route needs a body', async () => {
    const res = await app().inject({
      method: 'POST',
      url: '/v1/embeddings',
      payload: '',
      headers: { ...auth, 'content-type': 'application/json' },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json<ErrorBody>().error).toMatchObject({
      code: 'invalid_json',
      message: 'The request body is empty; send a JSON object.',
    });
  });
  it('takes an empty JSON body as none where the route reads no body', async () => {
    // curl sends the content type by habit; the route answers as it would without a body.
    for (const headers of [auth, { ...auth, 'content-type': 'application/json' }]) {
      const cancel = await app().inject({
        method: 'DELETE',
        url: '/v1/web-search/search/00000000-0000-4000-8000-000000000000',
        payload: '',
        headers,
      });
      expect(cancel.statusCode).toBe(404);
      expect(cancel.json<ErrorBody>().error.code).toBe('not_found');
      const generate = await app().inject({ method: 'POST', url: '/api/generate', payload: '', headers });
      expect(generate.statusCode).toBe(501);
    }
  });
  it('answers a JSON array body with invalid_request', async () => {
    const res = await post('/v1/embeddings', ['a']);
    expect(res.statusCode).toBe(400);
    expect(res.json<ErrorBody>().error.code).toBe('invalid_request');
  });
  it('answers a wrong content type with 415', async () => {
    const res = await app().inject({
      method: 'POST',
      url: '/v1/embeddings',
      payload: 'input=a',
      headers: { ...auth, 'content-type': 'text/plain' },
    });
    expect(res.statusCode).toBe(415);
    expect(res.json<ErrorBody>().error.code).toBe('unsupported_media_type');
  });
  it('answers an unknown route with route_not_found', async () => {
    const res = await app().inject({ method: 'GET', url: '/v1/nothing-here', headers: auth });
    expect(res.statusCode).toBe(404);
    expect(res.json<ErrorBody>().error.code).toBe('route_not_found');
  });
  it.each([
    '/v1/chat/completions',
    '/v1/completions',
    '/v1/responses',
    '/v1/images/generations',
    '/v1/audio/speech',
    '/v1/moderations',
  ])('answers %s with 501 unsupported_operation', async (url) => {
    const res = await post(url, { model: 'x' });
    expect(res.statusCode).toBe(501);
    expect(res.json<ErrorBody>().error.code).toBe('unsupported_operation');
  });
});

describe('body limit', () => {
  const small = useFakeApp({ bodyLimit: 4096 });
  it('answers a body over the limit with 413 payload_too_large', async () => {
    const res = await small.post('/v1/embeddings', { input: 'x'.repeat(10_000) });
    expect(res.statusCode).toBe(413);
    expect(res.json<ErrorBody>().error.code).toBe('payload_too_large');
  });
});

describe('URLs the router refuses before any route', () => {
  it('answers a path segment over 100 characters with 414 url_too_long, and a bad %-escape with 400, in the catalogue shape', async () => {
    const long = await app().inject({ method: 'GET', url: `/v1/models/${'m'.repeat(101)}`, headers: auth });
    expect(long.statusCode).toBe(414);
    expect(long.json<ErrorBody>().error).toMatchObject({ code: 'url_too_long', type: 'invalid_request_error' });
    const engine = await app().inject({
      method: 'POST',
      url: `/v1/engines/${'m'.repeat(101)}/embeddings`,
      headers: auth,
      payload: { input: 'a' },
    });
    expect(engine.json<ErrorBody>().error.code).toBe('url_too_long');
    const bad = await app().inject({ method: 'GET', url: '/v1/models/%E0%A4%A', headers: auth });
    expect(bad.statusCode).toBe(400);
    expect(bad.json<ErrorBody>().error.code).toBe('invalid_request');
  });
});
