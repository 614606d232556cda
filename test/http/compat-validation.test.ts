/**
 * The compatibility routes (TEI, Cohere v2, Ollama) without a model run: each API's error shape
 * for what it refuses, auth, the routes it does not offer, which models answer the TEI routes, and
 * the OpenAPI document. The app is over a fake core (test/helpers/fake-core.ts); what the routes
 * answer when a model runs is in compat.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config.js';
import { pickTeiModels } from '../../src/http/compat/tei.js';
import { Registry, type ServedModel } from '../../src/models/registry.js';
import { startFakeApp, useFakeApp } from '../helpers/fake-core.js';
import { auth } from '../helpers/server.js';

const { app, post, get } = useFakeApp();

describe('TEI errors', () => {
  it.each([
    ['/embed', { inputs: [] }],
    ['/embed', { inputs: 5 }],
    ['/embed', { inputs: [''] }],
    ['/embed', { inputs: ['a', 1] }],
    ['/embed', {}],
    ['/embed', { inputs: 'a', dimensions: 33 }],
    ['/embed', { inputs: 'a', normalize: 'yes' }],
    ['/embed', { inputs: 'a', truncation_direction: 'up' }],
    ['/embed', { inputs: [[7, 10_000_000]] }],
    ['/embed', { inputs: Array.from({ length: 2049 }, () => 'a') }],
    ['/rerank', { query: 'q', texts: [] }],
    ['/rerank', { query: '', texts: ['a'] }],
    ['/rerank', { query: 'q', texts: [1] }],
    ['/rerank', { texts: ['a'] }],
    ['/tokenize', { inputs: [] }],
    ['/tokenize', { inputs: 'a', prompt_name: 'nope' }],
    // Names every object has (`in` finds them): the first would put a function's source before the input.
    ['/tokenize', { inputs: 'a', prompt_name: 'constructor' }],
    ['/embed', { inputs: 'a', prompt_name: 'toString' }],
    ['/decode', { ids: [] }],
    ['/decode', { ids: [-1] }],
    ['/decode', { ids: [100_000] }],
    ['/decode', { ids: 'a' }],
  ])('answers %s %j with 400 in TEI\'s error shape', async (url, body) => {
    const res = await post(url, body);
    expect(res.statusCode).toBe(400);
    const error = res.json();
    expect(typeof error.error).toBe('string');
    expect(error.error_type).toBe('Validation');
    expect(error.code).toBe('invalid_request');
  });

  it('answers a missing key with 401 and a body TEI clients can read', async () => {
    const res = await post('/embed', { inputs: 'a' }, {});
    expect(res.statusCode).toBe(401);
    expect(res.headers['www-authenticate']).toBe('Bearer');
    expect(res.json()).toMatchObject({ error_type: 'Unauthorized', code: 'unauthorized' });
    expect((await get('/info', {})).statusCode).toBe(401);
  });

  it('answers bad JSON and TEI operations it does not offer', async () => {
    const bad = await app().inject({ method: 'POST', url: '/embed', payload: '{"inputs":', headers: { ...auth, 'content-type': 'application/json' } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ code: 'invalid_json', error_type: 'Validation' });
    const similarity = await post('/similarity', { inputs: { source_sentence: 'a', sentences: ['b'] } });
    expect(similarity.statusCode).toBe(501);
    expect(similarity.json().error).toMatch(/not supported/);
    // /predict is offered, but no classifier is served here.
    const predict = await post('/predict', { inputs: 'a' });
    expect(predict.statusCode).toBe(404);
    expect(predict.json()).toMatchObject({ code: 'model_not_found', error_type: 'Validation' });
    expect(predict.json().error).toMatch(/No classify model answers the TEI routes/);
  });
});

describe('teiModels setting', () => {
  const fake = (id: string, task: 'embedding' | 'rerank' | 'classify', kinds = ['dense']) => ({ id, task, aliases: [] as string[], heads: { kinds } }) as ServedModel;
  const registry = new Registry([fake('c1', 'classify'), fake('e1', 'embedding'), fake('r1', 'rerank'), fake('e2', 'embedding', ['dense', 'tokens']), fake('s1', 'embedding', ['sparse'])]);

  it('defaults to the first served embedder, reranker and classifier', () => {
    const picked = pickTeiModels(registry, []);
    expect([picked.embedder?.id, picked.reranker?.id, picked.classifier?.id, picked.primary?.id]).toEqual(['e1', 'r1', 'c1', 'e1']);
  });
  it('takes the first of each task from the list; the first listed describes the server', () => {
    const picked = pickTeiModels(registry, ['r1', 'e2']);
    expect([picked.embedder?.id, picked.reranker?.id, picked.primary?.id]).toEqual(['e2', 'r1', 'r1']);
  });
  it('answers /embed_sparse and /embed_all with the first model of that kind, listed or (without a list) served', () => {
    expect([pickTeiModels(registry, []).sparse?.id, pickTeiModels(registry, []).tokens?.id]).toEqual(['s1', 'e2']);
    const listed = pickTeiModels(registry, ['s1', 'e1']);
    expect([listed.embedder?.id, listed.sparse?.id, listed.tokens?.id, listed.primary?.id]).toEqual(['e1', 's1', undefined, 's1']);
  });
  it('refuses a model that is not served, naming the setting', () => {
    expect(() => pickTeiModels(registry, ['nope'])).toThrow(ConfigError);
    expect(() => pickTeiModels(registry, ['nope'])).toThrow(/ONNX_GATEWAY_TEI_MODELS.*"nope"/);
  });
  it('stops the start of a server whose setting names a model it does not serve', async () => {
    await expect(startFakeApp({ teiModels: ['tiny-embedder', 'nope'] })).rejects.toThrow(ConfigError);
  });
});

describe('a TEI reranker server', () => {
  const rerankOnly = useFakeApp({ teiModels: ['tiny-reranker'] });

  it('answers POST / as /rerank, describes the reranker, and has no /embed model', async () => {
    const root = await rerankOnly.post('/', { query: 'cat', texts: ['a cat', 'a dog'] });
    expect(root.statusCode).toBe(200);
    expect(root.json()[0]).toHaveProperty('score');
    const info = (await rerankOnly.get('/info')).json();
    expect(info).toMatchObject({ model_id: 'tiny-reranker', model_type: { reranker: { id2label: { 0: expect.any(String) } } } });
    const embed = await rerankOnly.post('/embed', { inputs: 'a' });
    expect(embed.statusCode).toBe(404);
    expect(embed.json()).toMatchObject({ code: 'model_not_found', error: expect.stringMatching(/TEI_MODELS/) });
  });
});

describe('Cohere POST /v2/rerank', () => {
  it.each([
    [{ query: 'q', documents: [] }, 400, 'invalid_request'],
    [{ query: 'q', documents: [{ text: 'a' }] }, 400, 'invalid_request'],
    [{ query: 'q', documents: ['a'], max_tokens_per_doc: 0 }, 400, 'invalid_request'],
    [{ query: 'q', documents: ['a'], top_n: '2' }, 400, 'invalid_request'],
    [{ model: 'rerank-v3.5', query: 'q', documents: ['a'] }, 404, 'model_not_found'],
    [{ model: 'tiny-embedder', query: 'q', documents: ['a'] }, 400, 'invalid_request'],
  ])('answers %j with %i %s', async (body, status, code) => {
    const res = await post('/v2/rerank', body);
    expect(res.statusCode).toBe(status);
    expect(res.json().error.code).toBe(code);
  });
});

describe('Ollama routes', () => {
  it.each([
    [{ model: 'nomic-embed-text', input: 'a' }, 404],
    [{ input: 'a' }, 400],
    [{ model: 'tiny-embedder', input: [] }, 400],
    [{ model: 'tiny-embedder', input: [1] }, 400],
    [{ model: 'tiny-embedder', input: '' }, 400],
    [{ model: 'tiny-reranker', input: 'a' }, 400],
    [{ model: 'tiny-embedder', input: 'a', truncate: 'no' }, 400],
    [{ model: 'tiny-embedder', input: 'a', dimensions: -1 }, 400],
  ])('answers /api/embed %j with %i and {error: string}', async (body, status) => {
    const res = await post('/api/embed', body);
    expect(res.statusCode).toBe(status);
    expect(Object.keys(res.json())).toEqual(['error']);
    expect(typeof res.json().error).toBe('string');
  });

  it('takes keep_alive as Ollama does, and names it when it is malformed', async () => {
    for (const keep_alive of ['5m', '1h30m', '500ms', 0, -1, '-1', 300]) {
      expect((await post('/api/embed', { model: 'tiny-embedder', input: 'a', keep_alive })).statusCode, String(keep_alive)).toBe(200);
    }
    expect((await post('/api/embeddings', { model: 'tiny-embedder', prompt: 'a', keep_alive: '30s' })).statusCode).toBe(200);
    for (const [url, body] of [
      ['/api/embed', { model: 'tiny-embedder', input: 'a', keep_alive: '5 minutes' }],
      ['/api/embeddings', { model: 'tiny-embedder', prompt: 'a', keep_alive: 'forever' }],
      ['/api/embed', { model: 'tiny-embedder', input: 'a', keep_alive: true }],
    ] as const) {
      const res = await post(url, body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json(), JSON.stringify(body)).toEqual({ error: expect.stringMatching(/^keep_alive /) });
    }
  });

  it('needs the key too, and answers generation routes with 501', async () => {
    const res = await get('/api/tags', {});
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: expect.stringMatching(/API key/) });
    expect((await post('/api/chat', { model: 'x', messages: [] })).statusCode).toBe(501);
  });
});

describe('OpenAPI document', () => {
  it('documents every compatibility route under its family tag, but not the TEI default route', async () => {
    const doc = (await app().inject({ method: 'GET', url: '/openapi.json' })).json();
    const tagOf = (path: string, method: string) => doc.paths[path]?.[method]?.tags?.[0];
    for (const path of ['/embed', '/rerank', '/predict', '/tokenize', '/decode']) expect(tagOf(path, 'post')).toBe('TEI compatibility');
    expect(tagOf('/info', 'get')).toBe('TEI compatibility');
    expect(tagOf('/v2/rerank', 'post')).toBe('Cohere compatibility');
    for (const path of ['/api/embed', '/api/embeddings', '/api/pull']) expect(tagOf(path, 'post')).toBe('Ollama compatibility');
    expect(tagOf('/api/tags', 'get')).toBe('Ollama compatibility');
    // The pull answers NDJSON lines, or one JSON object with stream false; 403 for keys that may not pull.
    const pull = doc.paths['/api/pull'].post;
    expect(Object.keys(pull.responses['200'].content).sort()).toEqual(['application/json', 'application/x-ndjson']);
    expect(pull.responses['200'].content['application/json'].schema.required).toEqual(['status']);
    expect(pull.responses['403'].content['application/json'].schema.required).toEqual(['error']);
    expect(Object.keys(pull.requestBody.content['application/json'].schema.properties)).toEqual(['model', 'name', 'insecure', 'stream']);
    expect(doc.paths['/']).toBeUndefined();
  });
});
