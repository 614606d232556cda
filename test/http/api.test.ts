/**
 * The OpenAI-style routes on a real server (the tiny models in worker threads): what their answers
 * hold. What the API refuses, and how, is in validation.test.ts, over a fake core.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { settings } from '../../src/config.js';
import type { Server } from '../../src/main.js';
import { chunkPair } from '../../src/text/chunking.js';
import {
  floatVectors,
  type EmbeddingList,
  type ErrorBody,
  type ModelCard,
  type RerankList,
} from '../helpers/bodies.js';
import { auth, startServer } from '../helpers/server.js';

let server: Server;
beforeAll(async () => {
  server = await startServer();
});
afterAll(() => server?.close());

const post = (url: string, body: unknown, headers: Record<string, string> = auth) =>
  server.app.inject({ method: 'POST', url, payload: body as object, headers });

function decodeBase64(text: string): Float32Array {
  const bytes = Buffer.from(text, 'base64');
  return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
}

describe('POST /v1/embeddings', () => {
  it('answers the OpenAI shape with float vectors of the native width, normalised', async () => {
    const res = await post('/v1/embeddings', { model: 'tiny-embedder', input: ['hello world', 'a second text'] });
    expect(res.statusCode).toBe(200);
    const body = res.json<EmbeddingList>();
    expect(body.object).toBe('list');
    expect(body.model).toBe('tiny-embedder');
    expect(body.data).toHaveLength(2);
    expect(body.data[1]).toMatchObject({ object: 'embedding', index: 1 });
    const vector = floatVectors(body)[0]!;
    expect(vector).toHaveLength(32);
    expect(Math.hypot(...vector)).toBeCloseTo(1, 5);
    expect(body.usage.prompt_tokens).toBeGreaterThan(4);
    expect(body.usage.total_tokens).toBe(body.usage.prompt_tokens);
    expect(res.headers['server-timing']).toMatch(/tokenize;dur=.*queue;dur=.*inference;dur=/);
  });

  it('encodes base64 as the little-endian float32 bytes of the same vector', async () => {
    const float = (await post('/v1/embeddings', { input: 'same text' })).json<EmbeddingList>().data[0]!
      .embedding as number[];
    const b64 = (await post('/v1/embeddings', { input: 'same text', encoding_format: 'base64' })).json<EmbeddingList>()
      .data[0]!.embedding as string;
    const decoded = decodeBase64(b64);
    expect(Array.from(decoded)).toEqual(float.map((x) => Math.fround(x)));
  });

  it('honours dimensions: first N components, renormalised', async () => {
    const full = (await post('/v1/embeddings', { input: 'cut me' })).json<EmbeddingList>().data[0]!
      .embedding as number[];
    const cut = (await post('/v1/embeddings', { input: 'cut me', dimensions: 8 })).json<EmbeddingList>().data[0]!
      .embedding as number[];
    expect(cut).toHaveLength(8);
    const norm = Math.hypot(...full.slice(0, 8));
    cut.forEach((x, i) => expect(x).toBeCloseTo(full[i]! / norm, 5));
    expect(
      (await post('/v1/embeddings', { input: 'x', dimensions: 0 })).json<EmbeddingList>().data[0]!.embedding,
    ).toHaveLength(32);
  });

  it('accepts token ids and arrays of token ids', async () => {
    const one = await post('/v1/embeddings', { input: [7, 8, 9] });
    expect(one.statusCode).toBe(200);
    expect(one.json<EmbeddingList>().data).toHaveLength(1);
    const many = await post('/v1/embeddings', { input: [[7, 8], [9]] });
    expect(many.json<EmbeddingList>().data).toHaveLength(2);
    const bad = await post('/v1/embeddings', { input: [[7, 10_000_000]] });
    expect(bad.statusCode).toBe(400);
    expect(bad.json<ErrorBody>().error.param).toBe('input[0]');
  });

  it('serves the engines path, where the path names the model', async () => {
    const res = await post('/v1/engines/tiny-embedder/embeddings', { input: 'x', model: 'something-else' });
    expect(res.statusCode).toBe(200);
    expect(res.json<EmbeddingList>().model).toBe('tiny-embedder');
    const unknown = await post('/v1/engines/nope/embeddings', { input: 'x' });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json<ErrorBody>().error.code).toBe('model_not_found');
  });

  it('truncates inputs longer than the window and counts the tokens used', async () => {
    const res = await post('/v1/embeddings', { input: 'word '.repeat(500) });
    expect(res.statusCode).toBe(200);
    expect(res.json<EmbeddingList>().usage.prompt_tokens).toBe(64);
  });

  it('handles unicode, emoji and control characters', async () => {
    const res = await post('/v1/embeddings', {
      input: ['naïve café', '日本語のテキスト', '👨‍👩‍👧‍👦 family', 'tab\there\u0000nul', '   '],
    });
    expect(res.statusCode).toBe(200);
    for (const vector of floatVectors(res.json<EmbeddingList>()))
      expect(vector.every((x) => Number.isFinite(x))).toBe(true);
  });
});

describe('POST /v1/rerank', () => {
  const documents = ['the cat sat on the mat', 'quantum field theory', { text: 'cats and dogs' }];

  it('answers results sorted by score with sigmoid scores, cut to top_n', async () => {
    const res = await post('/v1/rerank', {
      model: 'tiny-reranker',
      query: 'cat',
      documents,
      top_n: 2,
      return_documents: true,
    });
    expect(res.statusCode).toBe(200);
    const body = res.json<RerankList>();
    expect(body.id).toMatch(/[0-9a-f-]{36}/);
    expect(body.results).toHaveLength(2);
    expect(body.results[0]!.relevance_score).toBeGreaterThanOrEqual(body.results[1]!.relevance_score);
    for (const r of body.results) {
      expect(r.relevance_score).toBeGreaterThan(0);
      expect(r.relevance_score).toBeLessThan(1);
      const text =
        typeof documents[r.index] === 'string' ? documents[r.index] : (documents[r.index] as { text: string }).text;
      expect(r.document!.text).toBe(text);
    }
    expect(body.meta.api_version.version).toBeDefined();
    expect(body.meta.billed_units.search_units).toBe(1);
    expect(body.usage.total_tokens).toBeGreaterThan(0);
  });

  it('returns all documents without top_n, without document text by default', async () => {
    const body = (await post('/v1/rerank', { query: 'cat', documents })).json<RerankList>();
    expect(body.results.map((r) => r.index).sort()).toEqual([0, 1, 2]);
    expect(body.results[0]!.document).toBeUndefined();
  });

  it('scores a long document as its best window, each window scoring as a document of its own', async () => {
    // One token a word, so that every window is whole words and reads back as the text it was cut from.
    const words = ['water', 'energy', 'light', 'music', 'food', 'book'];
    const document = `${Array.from({ length: 100 }, (_, i) => words[i % words.length]).join(' ')} the lazy cat jumps over the dog`;
    const { tokenizer, maxTokens } = server.registry.list().find((m) => m.id === 'tiny-reranker')!;
    const query = 'cat';
    // The windows core/rerank.ts cuts: its overlap is the setting, at most a quarter of the room.
    const overlap = Math.min(
      settings.rerankChunkOverlap.default!,
      Math.floor((maxTokens - tokenizer.pairSpecials) / 4),
    );
    const windows = chunkPair(tokenizer.encode(query), tokenizer.encode(document), maxTokens, tokenizer.pairSpecials, {
      overlap,
      maxChunks: settings.rerankMaxChunks.default!,
    });
    const windowTexts = windows.map((ids) => tokenizer.decode(ids, true));
    expect(windows.length).toBeGreaterThan(2);
    windowTexts.forEach((text, i) =>
      expect(Array.from(tokenizer.encode(text)), `window ${i}`).toEqual(Array.from(windows[i]!)),
    );

    const body = (
      await post('/v1/rerank', { model: 'tiny-reranker', query, documents: [document, ...windowTexts] })
    ).json<RerankList>();
    const scoreOf = (index: number) => body.results.find((r) => r.index === index)!.relevance_score;
    const windowScores = windowTexts.map((_, i) => scoreOf(i + 1));
    const best = Math.max(...windowScores);
    expect(scoreOf(0)).toBeCloseTo(best, 6);
    // Not what cutting the document to its first window would give.
    expect(best - windowScores[0]!).toBeGreaterThan(1e-4);
  });
});

describe('GET /v1/models', () => {
  it('lists the served models in the OpenAI shape with task, dimensions and window', async () => {
    const res = await server.app.inject({ method: 'GET', url: '/v1/models', headers: auth });
    expect(res.statusCode).toBe(200);
    const body = res.json<{ object: 'list'; data: ModelCard[] }>();
    expect(body.object).toBe('list');
    const embedder = body.data.find((m) => m.id === 'tiny-embedder')!;
    expect(embedder).toMatchObject({
      object: 'model',
      task: 'embedding',
      dimensions: 32,
      max_tokens: 64,
      variant: 'fp32',
    });
    expect(typeof embedder.created).toBe('number');
    expect(typeof embedder.owned_by).toBe('string');
    expect(body.data.find((m) => m.id === 'tiny-reranker')).toMatchObject({ task: 'rerank' });
  });
});

describe('after bad input', () => {
  it('the workers still answer', async () => {
    expect((await post('/v1/embeddings', { input: [[7, 10_000_000]] })).statusCode).toBe(400);
    expect(
      (
        await server.app.inject({
          method: 'POST',
          url: '/v1/embeddings',
          payload: '{"input": "a"',
          headers: { ...auth, 'content-type': 'application/json' },
        })
      ).statusCode,
    ).toBe(400);
    const res = await post('/v1/embeddings', { input: 'still fine' });
    expect(res.statusCode).toBe(200);
  });
});
