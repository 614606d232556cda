/**
 * Official clients against the server over real HTTP on loopback: the OpenAI SDK (which asks for
 * base64 unless told otherwise) and LangChain's OpenAIEmbeddings.
 */
import { OpenAIEmbeddings } from '@langchain/openai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from '../../src/main.js';
import { startServer, testKey } from '../helpers/server.js';

let server: Server;
let baseURL: string;
beforeAll(async () => {
  server = await startServer();
  const address = await server.app.listen({ port: 0, host: '127.0.0.1' });
  baseURL = `${address}/v1`;
});
afterAll(() => server?.close());

const texts = ['the first text', 'a second, somewhat longer text'];
const norm = (vector: number[]) => Math.hypot(...vector);

describe('openai SDK', () => {
  const client = () => new OpenAI({ baseURL, apiKey: testKey, maxRetries: 0 });

  it('gets the same vectors with its default base64 encoding as with float', async () => {
    const base64 = await client().embeddings.create({ model: 'tiny-embedder', input: texts });
    const float = await client().embeddings.create({ model: 'tiny-embedder', input: texts, encoding_format: 'float' });
    expect(base64.data).toHaveLength(2);
    expect(base64.model).toBe('tiny-embedder');
    expect(base64.usage.prompt_tokens).toBeGreaterThan(0);
    for (let i = 0; i < texts.length; i++) {
      const fromBase64 = base64.data[i]!.embedding;
      expect(Array.isArray(fromBase64)).toBe(true);
      expect(fromBase64).toHaveLength(32);
      expect(fromBase64).toEqual(float.data[i]!.embedding.map((x) => Math.fround(x)));
      expect(norm(fromBase64)).toBeCloseTo(1, 5);
    }
    expect(base64.data[0]!.embedding).not.toEqual(base64.data[1]!.embedding);
  });

  it('honours dimensions with its default encoding and with float', async () => {
    const full = await client().embeddings.create({
      model: 'tiny-embedder',
      input: texts[0]!,
      encoding_format: 'float',
    });
    // Absent, the SDK asks for base64 and decodes it; named, it hands base64 strings back as they came.
    for (const encoding_format of [undefined, 'float'] as const) {
      const cut = await client().embeddings.create({
        model: 'tiny-embedder',
        input: texts[0]!,
        dimensions: 8,
        ...(encoding_format ? { encoding_format } : {}),
      });
      const vector = cut.data[0]!.embedding;
      expect(vector).toHaveLength(8);
      expect(norm(vector)).toBeCloseTo(1, 5);
      const scale = norm(full.data[0]!.embedding.slice(0, 8));
      vector.forEach((x, i) => expect(x).toBeCloseTo(full.data[0]!.embedding[i]! / scale, 5));
    }
  });

  it('lists the served models', async () => {
    const ids: string[] = [];
    for await (const model of client().models.list()) ids.push(model.id);
    expect(ids).toEqual(expect.arrayContaining(['tiny-embedder', 'tiny-reranker']));
  });

  it("surfaces errors as the SDK's typed errors, with the catalogue code", async () => {
    const wrongKey = new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 });
    await expect(wrongKey.embeddings.create({ model: 'tiny-embedder', input: 'x' })).rejects.toBeInstanceOf(
      OpenAI.AuthenticationError,
    );
    const error = await client()
      .embeddings.create({ model: 'no-such-model', input: 'x' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    expect((error as InstanceType<typeof OpenAI.NotFoundError>).code).toBe('model_not_found');
  });
});

describe('LangChain OpenAIEmbeddings', () => {
  const embeddings = (options: { dimensions?: number } = {}) =>
    new OpenAIEmbeddings({
      model: 'tiny-embedder',
      apiKey: testKey,
      configuration: { baseURL },
      maxRetries: 0,
      ...options,
    });

  it('embeds a query and documents, matching the OpenAI SDK', async () => {
    const query = await embeddings().embedQuery(texts[0]!);
    const documents = await embeddings().embedDocuments(texts);
    expect(query).toHaveLength(32);
    expect(documents).toHaveLength(2);
    const reference = await new OpenAI({ baseURL, apiKey: testKey }).embeddings.create({
      model: 'tiny-embedder',
      input: texts,
    });
    expect(query).toEqual(reference.data[0]!.embedding);
    documents.forEach((vector, i) => expect(vector).toEqual(reference.data[i]!.embedding));
  });

  it('passes dimensions through', async () => {
    const vector = await embeddings({ dimensions: 16 }).embedQuery(texts[1]!);
    expect(vector).toHaveLength(16);
    expect(norm(vector)).toBeCloseTo(1, 5);
  });
});
