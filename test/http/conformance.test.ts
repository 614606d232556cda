/**
 * Conformance to the specifications of the APIs this server stands in for: every route's answers,
 * successes and errors, for several request shapes each (the specifications' own examples among
 * them), validated with ajv against the JSON Schemas of TEI's openapi.json (1.9.3), OpenAI's
 * openapi.yaml (2.3.0) and Ollama's openapi.yaml (test/helpers/specs.ts). On a real server over
 * the tiny models; the moderation classifier's answers are checked in e2e/classify.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from '../../src/main.js';
import type { OllamaError } from '../helpers/bodies.js';
import { auth, startServer } from '../helpers/server.js';
import { expectConforms, specDocument, specErrors, specExample } from '../helpers/specs.js';

let server: Server;
beforeAll(async () => {
  server = await startServer();
});
afterAll(() => server?.close());

const send = (method: 'GET' | 'POST', url: string, body?: unknown, headers: Record<string, string> = auth) =>
  server.app.inject({ method, url, payload: body as object | undefined, headers });

describe("the fixtures: each specification's own examples conform to its schemas", () => {
  it('TEI', () => {
    const schemas = specDocument('tei').components.schemas;
    for (const name of [
      'EmbedResponse',
      'EmbedAllResponse',
      'TokenizeResponse',
      'DecodeResponse',
      'SimilarityResponse',
    ])
      expectConforms('tei', name, schemas[name]!.example, `${name}'s example`);
    expect(specErrors('tei', 'EmbedResponse', [['0.1']])).not.toEqual([]);
    // TEI's error_type is one of its enum; "Unauthorized" is not.
    expect(specErrors('tei', 'ErrorResponse', { error: 'no key', error_type: 'Unauthorized' })).not.toEqual([]);
  });

  it('Ollama', () => {
    const examples = specDocument('ollama')['x-examples']!;
    expectConforms('ollama', 'EmbedRequest', examples['/api/embed']!.request);
    expectConforms('ollama', 'EmbedResponse', examples['/api/embed']!.response);
    expectConforms('ollama', 'ListResponse', examples['/api/tags']!.response);
  });

  it('OpenAI', () => {
    // OpenAI's clients branch on every category: one missing fails the schema.
    const categories = Object.fromEntries(['hate', 'harassment'].map((c) => [c, false]));
    expect(
      specErrors('openai', 'CreateModerationResponse', {
        id: 'x',
        model: 'm',
        results: [{ flagged: false, categories, category_scores: {}, category_applied_input_types: {} }],
      }),
    ).not.toEqual([]);
  });
});

describe('TEI routes against TEI 1.9.3', () => {
  const statuses = specDocument('tei')['x-response-statuses']!;
  const example = (schema: string, property: string) => specExample('tei', schema, property);
  const teiSchemas = specDocument('tei').components.schemas;

  it.each([
    ['/embed', 'EmbedResponse', { inputs: 'What is Deep Learning?' }],
    [
      '/embed',
      'EmbedResponse',
      {
        inputs: ['What is Deep Learning?', 'Deep Learning is ...'],
        normalize: false,
        truncate: true,
        truncation_direction: 'Left',
      },
    ],
    ['/embed', 'EmbedResponse', { inputs: [[7, 8, 9], [10]], dimensions: 8 }],
    ['/embed', 'EmbedResponse', { inputs: 'hello', prompt_name: null, truncate: null }],
    ['/', 'EmbedResponse', { inputs: ['hello world'] }],
    ['/embed_all', 'EmbedAllResponse', { inputs: ['hello world', 'paris'] }],
    [
      '/rerank',
      'RerankResponse',
      { query: example('RerankRequest', 'query'), texts: example('RerankRequest', 'texts') },
    ],
    ['/rerank', 'RerankResponse', { query: 'cat', texts: ['a cat', 'a dog'], return_text: true, raw_scores: true }],
    ['/predict', 'PredictResponse', { inputs: teiSchemas.PredictInput!.example }],
    ['/predict', 'PredictResponse', { inputs: ['What is Deep Learning?', 'Deep Learning is ...'], raw_scores: true }],
    [
      '/predict',
      'PredictResponse',
      { inputs: [['What is Deep Learning?'], ['What is Deep Learning?', 'Deep Learning is ...']] },
    ],
    [
      '/similarity',
      'SimilarityResponse',
      {
        inputs: {
          source_sentence: example('SimilarityInput', 'source_sentence'),
          sentences: example('SimilarityInput', 'sentences'),
        },
      },
    ],
    [
      '/similarity',
      'SimilarityResponse',
      {
        inputs: { source_sentence: 'a', sentences: ['b', 'c'] },
        parameters: { truncate: true, truncation_direction: 'Right', prompt_name: null },
      },
    ],
    ['/tokenize', 'TokenizeResponse', { inputs: 'Héllo 👍 testing' }],
    ['/tokenize', 'TokenizeResponse', { inputs: ['hello world', 'paris'], add_special_tokens: false }],
    ['/decode', 'DecodeResponse', { ids: [2, 7, 8, 3] }],
    ['/decode', 'DecodeResponse', { ids: [[2, 7], [8]], skip_special_tokens: false }],
  ])("POST %s answers TEI's %s (%j)", async (url, schema, body) => {
    const res = await send('POST', url, body);
    expect(res.statusCode, res.body).toBe(200);
    expectConforms('tei', schema, res.json());
  });

  it("GET /info answers TEI's Info", async () => {
    const res = await send('GET', '/info');
    expect(res.statusCode).toBe(200);
    expectConforms('tei', 'Info', res.json());
  });

  it.each([
    ['/embed', { inputs: [] }, 400],
    ['/embed', { inputs: [''] }, 400],
    ['/embed', { inputs: Array.from({ length: 2049 }, () => 'a') }, 413],
    ['/embed', { inputs: 'word '.repeat(200), truncate: false }, 422],
    ['/embed', { inputs: 'a', dimensions: 10_000 }, 422],
    ['/embed', { inputs: 5 }, 422],
    ['/embed_sparse', { inputs: 'a' }, 424],
    ['/embed_all', { inputs: [] }, 400],
    ['/rerank', { query: 'q', texts: [] }, 400],
    ['/rerank', { texts: ['a'] }, 422],
    ['/predict', { inputs: [] }, 400],
    ['/predict', { inputs: [['a', 'b', 'c']] }, 422],
    ['/similarity', { inputs: { source_sentence: 'a', sentences: [] } }, 400],
    ['/similarity', { inputs: { source_sentence: 'a', sentences: Array.from({ length: 2048 }, () => 'a') } }, 413],
    ['/tokenize', { inputs: [] }, 400],
    ['/decode', { ids: 'a' }, 422],
  ])('POST %s %j answers %i, a status TEI documents for it, with its ErrorResponse', async (url, body, status) => {
    const res = await send('POST', url, body);
    expect(res.statusCode, res.body).toBe(status);
    expect(statuses[url]!.post).toContain(String(status));
    expectConforms('tei', 'ErrorResponse', res.json());
  });
});

describe('OpenAI routes against OpenAI 2.3.0', () => {
  it.each([
    [{ model: 'tiny-embedder', input: specExample('openai', 'CreateEmbeddingRequest', 'input') }],
    [{ model: 'tiny-embedder', input: ['hello world', 'paris'], encoding_format: 'float', user: 'someone' }],
    [{ model: 'tiny-embedder', input: [[7, 8, 9], [10]], dimensions: 8 }],
    [{ model: 'tiny-embedder', input: 'hello', encoding_format: 'int8' }],
    [{ model: 'tiny-embedder', input: 'hello', encoding_format: 'ubinary', dimensions: 12 }],
    [{ input: 'hello', input_type: 'query' }],
  ])('POST /v1/embeddings %j answers CreateEmbeddingResponse', async (body) => {
    const res = await send('POST', '/v1/embeddings', body);
    expect(res.statusCode, res.body).toBe(200);
    expectConforms('openai', 'CreateEmbeddingResponse', res.json());
  });

  it('GET /v1/models and /v1/models/{id} answer ListModelsResponse and Model', async () => {
    const list = await send('GET', '/v1/models');
    expectConforms('openai', 'ListModelsResponse', list.json());
    for (const id of ['tiny-embedder', 'tiny-reranker'])
      expectConforms('openai', 'Model', (await send('GET', `/v1/models/${id}`)).json(), id);
  });

  it.each([
    ['POST', '/v1/embeddings', { model: 'tiny-embedder', input: [] }, 400],
    ['POST', '/v1/embeddings', { model: 'text-embedding-3-small', input: 'a' }, 404],
    ['POST', '/v1/embeddings', { model: 'tiny-embedder', input: 'a', encoding_format: 'int4' }, 400],
    ['GET', '/v1/models/nope', undefined, 404],
    // No moderation classifier among the tiny models: OpenAI's error body with 501.
    ['POST', '/v1/moderations', { input: 'I want to kill them.' }, 501],
  ] as const)('%s %s %j answers %i with ErrorResponse', async (method, url, body, status) => {
    const res = await send(method, url, body);
    expect(res.statusCode, res.body).toBe(status);
    expectConforms('openai', 'ErrorResponse', res.json());
  });

  it('a missing key is a 401 with ErrorResponse', async () => {
    const res = await send('POST', '/v1/embeddings', { input: 'a' }, {});
    expect(res.statusCode).toBe(401);
    expectConforms('openai', 'ErrorResponse', res.json());
  });
});

describe("OpenAI's Files and Batch routes against OpenAI 2.3.0", () => {
  /** A multipart form as the SDK sends it: the file first, then its purpose. */
  const upload = (content: string, purpose = 'batch') => {
    const boundary = 'conformance-boundary';
    const payload = [
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="in.jsonl"\r\nContent-Type: application/jsonl\r\n\r\n${content}\r\n`,
      `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\n${purpose}\r\n`,
      `--${boundary}--\r\n`,
    ].join('');
    return server.app.inject({
      method: 'POST',
      url: '/v1/files',
      payload,
      headers: { ...auth, 'content-type': `multipart/form-data; boundary=${boundary}` },
    });
  };
  const line = JSON.stringify({
    custom_id: 'one',
    method: 'POST',
    url: '/v1/embeddings',
    body: { model: 'tiny-embedder', input: 'a' },
  });

  it('files answer OpenAIFile, ListFilesResponse and DeleteFileResponse', async () => {
    const created = await upload(`${line}\n`);
    expect(created.statusCode, created.body).toBe(200);
    expectConforms('openai', 'OpenAIFile', created.json());
    const id = created.json<{ id: string }>().id;
    expectConforms('openai', 'OpenAIFile', (await send('GET', `/v1/files/${id}`)).json());
    expectConforms('openai', 'ListFilesResponse', (await send('GET', '/v1/files?purpose=batch')).json());
    const content = await send('GET', `/v1/files/${id}/content`);
    expect(content.body).toBe(`${line}\n`);
    const deleted = await server.app.inject({ method: 'DELETE', url: `/v1/files/${id}`, headers: auth });
    expectConforms('openai', 'DeleteFileResponse', deleted.json());
  });

  it('batches answer Batch and ListBatchesResponse, created, listed and cancelled', async () => {
    const file = (await upload(`${line}\n`)).json<{ id: string }>();
    const body = { input_file_id: file.id, endpoint: '/v1/embeddings', completion_window: '24h', metadata: { a: 'b' } };
    expectConforms('openai', 'CreateBatchRequest', body);
    const created = await send('POST', '/v1/batches', body);
    expect(created.statusCode, created.body).toBe(200);
    expectConforms('openai', 'Batch', created.json());
    const id = created.json<{ id: string }>().id;
    expectConforms('openai', 'Batch', (await send('POST', `/v1/batches/${id}/cancel`)).json());
    expectConforms('openai', 'Batch', (await send('GET', `/v1/batches/${id}`)).json());
    expectConforms('openai', 'ListBatchesResponse', (await send('GET', '/v1/batches?limit=5')).json());
  });

  it.each([
    ['GET', '/v1/files/file-000000000000000000000000', undefined, 404],
    ['GET', '/v1/batches/batch_nope', undefined, 404],
    [
      'POST',
      '/v1/batches',
      { input_file_id: 'file-x', endpoint: '/v1/chat/completions', completion_window: '24h' },
      400,
    ],
    ['POST', '/v1/batches', { endpoint: '/v1/embeddings', completion_window: '24h' }, 400],
    ['GET', '/v1/files?limit=0', undefined, 400],
  ] as const)('%s %s %j answers %i with ErrorResponse', async (method, url, body, status) => {
    const res = await send(method, url, body);
    expect(res.statusCode, res.body).toBe(status);
    expectConforms('openai', 'ErrorResponse', res.json());
  });

  it('an upload with another purpose is a 400 with ErrorResponse', async () => {
    const res = await upload(`${line}\n`, 'fine-tune');
    expect(res.statusCode).toBe(400);
    expectConforms('openai', 'ErrorResponse', res.json());
  });
});

describe('Ollama routes against Ollama v0.33.0-rc2', () => {
  const specRequest = specDocument('ollama')['x-examples']!['/api/embed']!.request as { model: string };

  it.each([
    [{ ...specRequest, model: 'tiny-embedder' }],
    [{ model: 'tiny-embedder:latest', input: ['Why is the sky blue?', 'Why is the grass green?'] }],
    [{ model: 'tiny-embedder', input: 'Generate embeddings for this text', truncate: true }],
    [
      {
        model: 'tiny-embedder',
        input: 'Generate embeddings for this text',
        dimensions: 8,
        keep_alive: '5m',
        options: { num_ctx: 64 },
      },
    ],
  ])('POST /api/embed %j answers EmbedResponse', async (body) => {
    const res = await send('POST', '/api/embed', body);
    expect(res.statusCode, res.body).toBe(200);
    expectConforms('ollama', 'EmbedResponse', res.json());
  });

  it('GET /api/tags answers ListResponse', async () => {
    const res = await send('GET', '/api/tags');
    expect(res.statusCode).toBe(200);
    expectConforms('ollama', 'ListResponse', res.json());
  });

  it.each([
    ['POST', '/api/embed', { ...specRequest }, 404],
    ['POST', '/api/embed', { model: 'tiny-embedder', input: [] }, 400],
    ['POST', '/api/embed', { model: 'tiny-embedder', input: 'word '.repeat(200), truncate: false }, 400],
    ['POST', '/api/chat', { model: 'x', messages: [] }, 501],
  ] as const)('%s %s %j answers %i with ErrorResponse', async (method, url, body, status) => {
    const res = await send(method, url, body);
    expect(res.statusCode, res.body).toBe(status);
    expectConforms('ollama', 'ErrorResponse', res.json());
    expect(typeof res.json<OllamaError>().error).toBe('string');
  });
});
