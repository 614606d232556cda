/**
 * The published clients of TEI, Cohere and Ollama, unmodified, against a real server over HTTP:
 * only their base URL and key point here.
 */
import type { AddressInfo } from 'node:net';
import { InferenceClient, InferenceClientProviderApiError } from '@huggingface/inference';
import { CohereClient, CohereClientV2, CohereError } from 'cohere-ai';
import { Ollama } from 'ollama';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from '../../src/main.js';
import { auth, startServer, testKey } from '../helpers/server.js';

let server: Server;
let base: string;
beforeAll(async () => {
  server = await startServer();
  await server.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(server.app.server.address() as AddressInfo).port}`;
});
afterAll(() => server?.close());

async function v1Embedding(input: string): Promise<number[]> {
  const res = await fetch(`${base}/v1/embeddings`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny-embedder', input }),
  });
  return ((await res.json()) as { data: { embedding: number[] }[] }).data[0]!.embedding;
}

function expectClose(actual: number[], expected: number[]) {
  expect(actual).toHaveLength(expected.length);
  actual.forEach((x, i) => expect(x).toBeCloseTo(expected[i]!, 5));
}

const documents = ['the cat sat on the mat', 'quantum field theory', 'cats and dogs', 'a dog in the city'];

describe('cohere-ai', () => {
  it('v1 client: rerank with returnDocuments, on POST /v1/rerank', async () => {
    const cohere = new CohereClient({ token: testKey, environment: base });
    const response = await cohere.rerank({
      model: 'tiny-reranker',
      query: 'cat',
      documents,
      topN: 3,
      returnDocuments: true,
    });
    expect(response.results).toHaveLength(3);
    for (const result of response.results) {
      expect(result.document?.text).toBe(documents[result.index]);
      expect(result.relevanceScore).toBeGreaterThan(0);
      expect(result.relevanceScore).toBeLessThan(1);
    }
    expect(response.results[0]!.relevanceScore).toBeGreaterThanOrEqual(response.results[1]!.relevanceScore);
  });

  it('v2 client: rerank with topN and maxTokensPerDoc, on POST /v2/rerank', async () => {
    const cohere = new CohereClientV2({ token: testKey, baseUrl: base });
    const response = await cohere.rerank({
      model: 'tiny-reranker',
      query: 'cat',
      documents,
      topN: 2,
      maxTokensPerDoc: 16,
    });
    expect(response.results).toHaveLength(2);
    expect(response.meta?.apiVersion?.version).toBe('2');
    expect(response.meta?.billedUnits?.searchUnits).toBe(1);
    const v1 = await new CohereClient({ token: testKey, environment: base }).rerank({
      model: 'tiny-reranker',
      query: 'cat',
      documents,
      topN: 2,
    });
    expect(response.results.map((r) => r.index)).toEqual(v1.results.map((r) => r.index));
  });

  it('v2 client: embed in every embedding type, each agreeing with the float answer of the same texts', async () => {
    const cohere = new CohereClientV2({ token: testKey, baseUrl: base });
    const texts = ['hello world', 'the quick brown fox', 'paris'];
    const response = await cohere.embed({
      model: 'tiny-embedder',
      texts,
      inputType: 'search_query',
      embeddingTypes: ['float', 'int8', 'uint8', 'binary', 'ubinary', 'base64'],
      outputDimension: 12,
    });
    expect(response.responseType).toBe('embeddings_by_type');
    expect(response.texts).toEqual(texts);
    expect(response.meta?.billedUnits?.inputTokens).toBeGreaterThan(0);
    const { float, int8, uint8, binary, ubinary, base64 } = response.embeddings;
    expect(float).toHaveLength(3);
    float!.forEach((vector, row) => {
      expect(vector).toHaveLength(12);
      // Every bit of ubinary is the sign of the float component (big-endian within a byte; 12 dimensions: 2 bytes).
      expect(ubinary![row]).toHaveLength(2);
      vector.forEach((x, d) =>
        expect((ubinary![row]![d >> 3]! >> (7 - (d & 7))) & 1, `row ${row} dimension ${d}`).toBe(x > 0 ? 1 : 0),
      );
      expect(binary![row]).toEqual(ubinary![row]!.map((byte) => byte - 128));
      // int8 and uint8 are the same levels, 128 apart (int8 truncates toward zero, so below the middle it can be one higher).
      vector.forEach((_, d) => expect(int8![row]![d]! - (uint8![row]![d]! - 128)).toBeGreaterThanOrEqual(0));
      vector.forEach((_, d) => expect(int8![row]![d]! - (uint8![row]![d]! - 128)).toBeLessThanOrEqual(1));
      const bytes = Buffer.from(base64![row]!, 'base64');
      expectClose(Array.from(new Float32Array(Uint8Array.from(bytes).buffer)), vector);
    });
    // The float answer is /v1's with the same cut.
    const v1 = await fetch(`${base}/v1/embeddings`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny-embedder', input: texts[2], dimensions: 12, input_type: 'query' }),
    });
    expectClose(float![2]!, ((await v1.json()) as { data: { embedding: number[] }[] }).data[0]!.embedding);
  });

  it('v2 client: an unknown model is a 404 the client reports', async () => {
    const cohere = new CohereClientV2({ token: testKey, baseUrl: base, maxRetries: 0 });
    const error = await cohere.rerank({ model: 'rerank-v3.5', query: 'cat', documents }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CohereError);
    expect((error as CohereError).statusCode).toBe(404);
    expect((error as CohereError).message).toMatch(/not served here/);
  });

  it('a wrong key is a 401', async () => {
    const cohere = new CohereClientV2({ token: 'wrong', baseUrl: base, maxRetries: 0 });
    const error = await cohere.rerank({ model: 'tiny-reranker', query: 'cat', documents }).catch((e: unknown) => e);
    expect((error as CohereError).statusCode).toBe(401);
  });
});

describe('@huggingface/inference (TEI)', () => {
  it('featureExtraction at the server root, as on a TEI endpoint, gives the /v1 vector', async () => {
    const client = new InferenceClient(testKey).endpoint(base);
    const vectors = (await client.featureExtraction({ inputs: ['hello world'] })) as number[][];
    expect(vectors).toHaveLength(1);
    expectClose(vectors[0]!, await v1Embedding('hello world'));
  });

  it('featureExtraction at /embed, with TEI parameters', async () => {
    const client = new InferenceClient(testKey).endpoint(`${base}/embed`);
    const vectors = (await client.featureExtraction({
      inputs: 'hello world',
      normalize: true,
      truncate: true,
      truncation_direction: 'left',
    })) as number[][];
    expectClose(vectors[0]!, await v1Embedding('hello world'));
  });

  it("shows the server's message on bad input, with TEI's status", async () => {
    const client = new InferenceClient(testKey).endpoint(`${base}/embed`);
    const error = await client.featureExtraction({ inputs: [] as string[] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InferenceClientProviderApiError);
    expect((error as Error).message).toMatch(/cannot be empty/);
    expect((error as InferenceClientProviderApiError).httpResponse.status).toBe(400);
    const long = await client
      .featureExtraction({ inputs: 'word '.repeat(200), truncate: false })
      .catch((e: unknown) => e);
    expect((long as InferenceClientProviderApiError).httpResponse.status).toBe(422);
    expect((long as Error).message).toMatch(/tokens/);
  });

  it('sentenceSimilarity at /similarity: the cosines of the /v1 vectors', async () => {
    const client = new InferenceClient(testKey).endpoint(`${base}/similarity`);
    const scores = await client.sentenceSimilarity({
      inputs: { source_sentence: 'hello world', sentences: ['hello world', 'paris'] },
    });
    const [a, b] = [await v1Embedding('hello world'), await v1Embedding('paris')];
    expect(scores).toHaveLength(2);
    expect(scores[0]).toBeCloseTo(1, 5);
    expect(scores[1]).toBeCloseTo(
      a.reduce((sum, x, i) => sum + x * b[i]!, 0),
      5,
    );
  });
});

describe('ollama', () => {
  const ollama = () => new Ollama({ host: base, headers: { Authorization: `Bearer ${testKey}` } });

  it('embed: a string or strings, with an Ollama-style :latest name', async () => {
    const response = await ollama().embed({ model: 'tiny-embedder:latest', input: ['hello world', 'paris'] });
    expect(response.embeddings).toHaveLength(2);
    expectClose(response.embeddings[0]!, await v1Embedding('hello world'));
    expect(response.prompt_eval_count).toBe(7);
    const one = await ollama().embed({ model: 'tiny-embedder', input: 'hello world', dimensions: 8 });
    expect(one.embeddings[0]).toHaveLength(8);
  });

  it('embeddings (the older call)', async () => {
    const response = await ollama().embeddings({ model: 'tiny-embedder', prompt: 'hello world' });
    expectClose(response.embedding, await v1Embedding('hello world'));
  });

  it('list: the embedding models', async () => {
    const { models } = await ollama().list();
    expect(models.map((m) => m.name)).toEqual(['tiny-embedder:latest']);
    expect(models[0]!.details.family).toBe('bert');
  });

  it("an unknown model: the client's ResponseError carries the message and 404", async () => {
    const error = await ollama()
      .embed({ model: 'nomic-embed-text', input: 'a' })
      .catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/not served here/);
    expect((error as { status_code?: number }).status_code).toBe(404);
  });

  it('no key: 401 with a readable message', async () => {
    const error = await new Ollama({ host: base }).list().catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/API key/);
    expect((error as { status_code?: number }).status_code).toBe(401);
  });
});
