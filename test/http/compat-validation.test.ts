/**
 * The compatibility routes (TEI, Cohere v2, Ollama) without a model run: each API's error shape
 * for what it refuses, auth, the routes it does not offer, which models answer the TEI routes, and
 * the OpenAPI document. The app is over a fake core (test/helpers/fake-core.ts); what the routes
 * answer when a model runs is in compat.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config.js';
import { catalogue } from '../../src/errors.js';
import { pickTeiModels } from '../../src/http/compat/tei.js';
import { Registry, type ServedModel } from '../../src/models/registry.js';
import type { ErrorBody, OllamaError, TeiError } from '../helpers/bodies.js';
import { startFakeApp, useFakeApp } from '../helpers/fake-core.js';
import { auth } from '../helpers/server.js';

/** TEI's /info on a reranker server: the labels of its one output. */
interface RerankerInfo {
  model_type: { reranker: { id2label: Record<string, string> } };
}

/** The parts of the OpenAPI document read here. */
interface OpenApiDocument {
  paths: Record<string, Record<string, Operation>>;
}
interface Operation {
  tags?: string[];
  requestBody?: { content: Record<string, { schema: { properties: object } }> };
  responses: Record<string, { content: Record<string, { schema: { required?: string[] } }> }>;
}

const { app, post, get } = useFakeApp();

describe("TEI errors: TEI's statuses and error types", () => {
  const many = (n: number) => Array.from({ length: n }, () => 'a');
  it.each([
    ['/embed', { inputs: 5 }],
    ['/embed', { inputs: ['a', 1] }],
    ['/embed', {}],
    ['/embed', { inputs: 'a', dimensions: 33 }],
    ['/embed', { inputs: 'a', normalize: 'yes' }],
    ['/embed', { inputs: 'a', truncation_direction: 'up' }],
    ['/embed', { inputs: [[7, 10_000_000]] }],
    ['/rerank', { query: '', texts: ['a'] }],
    ['/rerank', { query: 'q', texts: [1] }],
    ['/rerank', { texts: ['a'] }],
    ['/predict', { inputs: [['a', 'b', 'c']] }],
    ['/similarity', { inputs: { source_sentence: 'a' } }],
    ['/similarity', { inputs: { source_sentence: 'a', sentences: ['b'] }, parameters: { prompt_name: 'nope' } }],
    ['/tokenize', { inputs: 'a', prompt_name: 'nope' }],
    // Names every object has (`in` finds them): the first would put a function's source before the input.
    ['/tokenize', { inputs: 'a', prompt_name: 'constructor' }],
    ['/embed', { inputs: 'a', prompt_name: 'toString' }],
    ['/decode', { ids: [] }],
    ['/decode', { ids: [-1] }],
    ['/decode', { ids: [100_000] }],
    ['/decode', { ids: 'a' }],
  ])('answers %s %j with 422 Validation, as TEI', async (url, body) => {
    const res = await post(url, body);
    expect(res.statusCode, res.body).toBe(422);
    const error = res.json<TeiError>();
    expect(typeof error.error).toBe('string');
    expect(error.error_type).toBe('Validation');
    expect(error.code).toBe('invalid_request');
  });

  it.each([
    ['/embed', { inputs: [] }],
    ['/embed', { inputs: [''] }],
    ['/embed', { inputs: '' }],
    ['/embed', { inputs: [[]] }],
    ['/embed_all', { inputs: [] }],
    ['/rerank', { query: 'q', texts: [] }],
    ['/predict', { inputs: [] }],
    ['/predict', { inputs: [['a'], ['']] }],
    ['/similarity', { inputs: { source_sentence: 'a', sentences: [] } }],
    ['/tokenize', { inputs: [] }],
  ])('answers %s %j, an empty batch or text, with 400 Empty, as TEI', async (url, body) => {
    const res = await post(url, body);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toMatchObject({
      error_type: 'Empty',
      code: 'invalid_request',
      error: expect.stringMatching(/cannot be empty/) as unknown,
    });
  });

  it.each([
    ['/embed', { inputs: many(2049) }],
    ['/rerank', { query: 'q', texts: many(2049) }],
    ['/predict', { inputs: many(2049) }],
    ['/similarity', { inputs: { source_sentence: 'a', sentences: many(2048) } }],
  ])('answers %s over the batch limit with 413 Validation, as TEI', async (url, body) => {
    const res = await post(url, body);
    expect(res.statusCode, res.body).toBe(413);
    expect(res.json()).toMatchObject({
      error_type: 'Validation',
      error: expect.stringMatching(/^batch size \d+ > maximum allowed batch size 2048$/) as unknown,
    });
  });

  it('answers a missing or wrong key with a bare 401, as TEI', async () => {
    for (const headers of [{}, { authorization: 'Bearer wrong' }] as Record<string, string>[]) {
      const res = await post('/embed', { inputs: 'a' }, headers);
      expect(res.statusCode).toBe(401);
      expect(res.headers['www-authenticate']).toBe('Bearer');
      expect(res.body).toBe('');
    }
    expect((await get('/info', {})).statusCode).toBe(401);
  });

  it("answers a body that is not JSON with 400, as TEI's HTTP layer", async () => {
    const bad = await app().inject({
      method: 'POST',
      url: '/embed',
      payload: '{"inputs":',
      headers: { ...auth, 'content-type': 'application/json' },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ code: 'invalid_json', error_type: 'Validation' });
  });
});

describe('a TEI embedder server', () => {
  const embedderOnly = useFakeApp({ teiModels: ['tiny-embedder'] });

  it('answers the routes its model can not serve with 424 Backend, as TEI', async () => {
    for (const [url, body] of [
      ['/predict', { inputs: 'a' }],
      ['/rerank', { query: 'q', texts: ['a'] }],
      ['/embed_sparse', { inputs: 'a' }],
    ] as const) {
      const res = await embedderOnly.post(url, body);
      expect(res.statusCode, url).toBe(424);
      expect(res.json(), url).toMatchObject({
        error_type: 'Backend',
        code: 'model_not_found',
        error: expect.stringMatching(/TEI_MODELS/) as unknown,
      });
    }
  });

  it('answers /similarity: the cosine of the source sentence with each sentence, from the /embed vectors', async () => {
    const sentences = ['hello world', 'paris', 'the quick brown fox'];
    const res = await embedderOnly.post('/similarity', { inputs: { source_sentence: 'hello world', sentences } });
    expect(res.statusCode, res.body).toBe(200);
    const scores: number[] = res.json();
    const [source, ...others]: number[][] = (
      await embedderOnly.post('/embed', { inputs: ['hello world', ...sentences] })
    ).json();
    const dot = (a: number[], b: number[]) => a.reduce((sum, x, i) => sum + x * b[i]!, 0);
    expect(scores).toHaveLength(3);
    scores.forEach((score, i) => expect(score).toBeCloseTo(dot(source!, others[i]!), 5));
    expect(scores[0]).toBeCloseTo(1, 5);
    expect(new Set(scores.map((s) => s.toFixed(4))).size).toBe(3);
  });

  it('describes its model in /info with the served model name', async () => {
    const info = (await embedderOnly.get('/info')).json<unknown>();
    expect(info).toMatchObject({
      model_id: 'tiny-embedder',
      served_model_name: 'tiny-embedder',
      model_type: { embedding: { pooling: 'mean' } },
    });
  });
});

describe('teiModels setting', () => {
  const fake = (id: string, task: 'embedding' | 'rerank' | 'classify', kinds = ['dense']) =>
    ({ id, task, aliases: [] as string[], heads: { kinds } }) as ServedModel;
  const registry = new Registry([
    fake('c1', 'classify'),
    fake('e1', 'embedding'),
    fake('r1', 'rerank'),
    fake('e2', 'embedding', ['dense', 'tokens']),
    fake('s1', 'embedding', ['sparse']),
  ]);

  it('defaults to the first served embedder, reranker and classifier', () => {
    const picked = pickTeiModels(registry, []);
    expect([picked.embedder?.id, picked.reranker?.id, picked.classifier?.id, picked.primary?.id]).toEqual([
      'e1',
      'r1',
      'c1',
      'e1',
    ]);
  });
  it('takes the first of each task from the list; the first listed describes the server', () => {
    const picked = pickTeiModels(registry, ['r1', 'e2']);
    expect([picked.embedder?.id, picked.reranker?.id, picked.primary?.id]).toEqual(['e2', 'r1', 'r1']);
  });
  it('answers /embed_sparse and /embed_all with the first model of that kind, listed or (without a list) served', () => {
    expect([pickTeiModels(registry, []).sparse?.id, pickTeiModels(registry, []).tokens?.id]).toEqual(['s1', 'e2']);
    const listed = pickTeiModels(registry, ['s1', 'e1']);
    expect([listed.embedder?.id, listed.sparse?.id, listed.tokens?.id, listed.primary?.id]).toEqual([
      'e1',
      's1',
      undefined,
      's1',
    ]);
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
    expect(root.json<unknown[]>()[0]).toHaveProperty('score');
    const info = (await rerankOnly.get('/info')).json<unknown>();
    expect(info).toMatchObject({
      model_id: 'tiny-reranker',
      model_type: { reranker: { id2label: { 0: expect.any(String) as unknown } } },
    });
    const embed = await rerankOnly.post('/embed', { inputs: 'a' });
    expect(embed.statusCode).toBe(424);
    expect(embed.json()).toMatchObject({
      code: 'model_not_found',
      error_type: 'Backend',
      error: expect.stringMatching(/TEI_MODELS/) as unknown,
    });
  });

  it('answers /predict with the cross-encoder as TEI does: its label and the score /rerank gives, for texts, pairs and batches', async () => {
    const label = (await rerankOnly.get('/info')).json<RerankerInfo>().model_type.reranker.id2label[0];
    const ranks: Array<{ index: number; score: number }> = (
      await rerankOnly.post('/rerank', { query: 'cat', texts: ['a cat', 'a dog'] })
    ).json();
    const byIndex = (i: number) => ranks.find((r) => r.index === i)!.score;
    const pair = await rerankOnly.post('/predict', { inputs: ['cat', 'a cat'] });
    expect(pair.statusCode, pair.body).toBe(200);
    expect(pair.json()).toEqual([{ label, score: expect.closeTo(byIndex(0), 6) as unknown }]);
    // TEI's batch form: items of one string (a text) or two (a pair).
    const batch = await rerankOnly.post('/predict', { inputs: [['cat', 'a dog'], ['a cat'], ['cat', 'a cat']] });
    expect(batch.statusCode, batch.body).toBe(200);
    const [dog, text, cat] = batch.json<Array<Array<{ label: string; score: number }>>>();
    expect(dog![0]!.score).toBeCloseTo(byIndex(1), 6);
    expect(cat![0]!.score).toBeCloseTo(byIndex(0), 6);
    expect(text).toEqual([{ label, score: expect.any(Number) as unknown }]);
    // A list of one string is one text, answered as a single input.
    const one = (await rerankOnly.post('/predict', { inputs: ['a cat'] })).json<unknown>();
    expect(one).toEqual(text);
  });
});

describe('quantized embeddings under a small input limit', () => {
  const small = useFakeApp({ maxInputs: 16 });

  it('calibrates int8 on the 65 calibration texts in requests within the limit', async () => {
    for (const [url, body] of [
      ['/v1/embeddings', { input: ['a', 'b'], encoding_format: 'int8' }],
      ['/v2/embed', { model: 'tiny-embedder', texts: ['a', 'b'], embedding_types: ['uint8'] }],
    ] as const) {
      const res = await small.post(url, body);
      expect(res.statusCode, res.body).toBe(200);
    }
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
    expect(res.json<ErrorBody>().error.code).toBe(code);
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
  ])("answers /api/embed %j with %i and {error: string} (with the catalogue's code)", async (body, status) => {
    const res = await post('/api/embed', body);
    expect(res.statusCode).toBe(status);
    expect(Object.keys(res.json())).toEqual(['error', 'code']);
    expect(typeof res.json<OllamaError>().error).toBe('string');
    expect(catalogue[res.json<OllamaError>().code].status).toBe(status);
  });

  it('takes keep_alive as Ollama does, and names it when it is malformed', async () => {
    for (const keep_alive of ['5m', '1h30m', '500ms', 0, -1, '-1', 300]) {
      expect(
        (await post('/api/embed', { model: 'tiny-embedder', input: 'a', keep_alive })).statusCode,
        String(keep_alive),
      ).toBe(200);
    }
    expect((await post('/api/embeddings', { model: 'tiny-embedder', prompt: 'a', keep_alive: '30s' })).statusCode).toBe(
      200,
    );
    for (const [url, body] of [
      ['/api/embed', { model: 'tiny-embedder', input: 'a', keep_alive: '5 minutes' }],
      ['/api/embeddings', { model: 'tiny-embedder', prompt: 'a', keep_alive: 'forever' }],
      ['/api/embed', { model: 'tiny-embedder', input: 'a', keep_alive: true }],
    ] as const) {
      const res = await post(url, body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json(), JSON.stringify(body)).toEqual({
        error: expect.stringMatching(/^keep_alive /) as unknown,
        code: 'invalid_request',
      });
    }
  });

  it('needs the key too, and answers generation routes with 501', async () => {
    const res = await get('/api/tags', {});
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: expect.stringMatching(/API key/) as unknown, code: 'unauthorized' });
    expect((await post('/api/chat', { model: 'x', messages: [] })).statusCode).toBe(501);
  });
});

describe('OpenAPI document', () => {
  it('documents every compatibility route under its family tag, but not the TEI default route', async () => {
    const doc = (await app().inject({ method: 'GET', url: '/openapi.json' })).json<OpenApiDocument>();
    const tagOf = (path: string, method: string) => doc.paths[path]?.[method]?.tags?.[0];
    for (const path of ['/embed', '/rerank', '/predict', '/tokenize', '/decode'])
      expect(tagOf(path, 'post')).toBe('TEI compatibility');
    expect(tagOf('/info', 'get')).toBe('TEI compatibility');
    expect(tagOf('/v2/rerank', 'post')).toBe('Cohere compatibility');
    for (const path of ['/api/embed', '/api/embeddings', '/api/pull'])
      expect(tagOf(path, 'post')).toBe('Ollama compatibility');
    expect(tagOf('/api/tags', 'get')).toBe('Ollama compatibility');
    // The pull answers NDJSON lines, or one JSON object with stream false; 403 for keys that may not pull.
    const pull = doc.paths['/api/pull']!.post!;
    expect(Object.keys(pull.responses['200']!.content).sort()).toEqual(['application/json', 'application/x-ndjson']);
    expect(pull.responses['200']!.content['application/json']!.schema.required).toEqual(['status']);
    expect(pull.responses['403']!.content['application/json']!.schema.required).toEqual(['error']);
    expect(Object.keys(pull.requestBody!.content['application/json']!.schema.properties)).toEqual([
      'model',
      'name',
      'insecure',
      'stream',
    ]);
    expect(doc.paths['/']).toBeUndefined();
  });
});
