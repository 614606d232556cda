/**
 * The served vectors and scores against golden outputs from an independent float64 implementation
 * of the exact all-MiniLM-L6-v2 and ms-marco-MiniLM-L-6-v2 architectures (tolerance 1e-4),
 * one input at a time and batched together.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from '../../src/main.js';
import { auth, sharedModelsDir, sharedModelsHint, startServer } from '../helpers/server.js';
import { missing } from '../helpers/resources.js';

const modelsDir = sharedModelsDir();
const embedderId = 'synthetic-all-MiniLM-L6-v2';
const rerankerId = 'synthetic-ms-marco-MiniLM-L-6-v2';
const tolerance = 1e-4;

interface EmbedderItem {
  text: string;
  input_ids: number[];
  normalized: number[];
  normalized_128: number[];
  normalized_64: number[];
}
interface RerankItem {
  query: string;
  document: string;
  input_ids: number[];
  logit: number;
  score: number;
  truncated: boolean;
}

const golden = <Item>(model: string) =>
  JSON.parse(readFileSync(join(modelsDir!, model, 'golden.json'), 'utf8')) as { items: Item[] };

function expectClose(actual: ArrayLike<number>, expected: number[]) {
  expect(actual.length).toBe(expected.length);
  let worst = 0;
  for (let i = 0; i < expected.length; i++) worst = Math.max(worst, Math.abs(actual[i]! - expected[i]!));
  expect(worst).toBeLessThanOrEqual(tolerance);
}

describe.skipIf(missing(modelsDir !== undefined, sharedModelsHint))(
  `golden outputs (${modelsDir ? 'synthetic models' : sharedModelsHint})`,
  () => {
    let server: Server;
    let truncating: Server;
    let items: EmbedderItem[];
    let pairs: RerankItem[];
    beforeAll(async () => {
      items = golden<EmbedderItem>(embedderId).items;
      pairs = golden<RerankItem>(rerankerId).items;
      server = await startServer({ modelsDir, models: [embedderId, rerankerId] });
      truncating = await startServer({ modelsDir, models: [rerankerId], rerankMaxChunks: 1, workers: 1 });
    });
    afterAll(async () => {
      await server?.close();
      await truncating?.close();
    });

    const embed = async (input: unknown, extra: object = {}) => {
      const res = await server.app.inject({
        method: 'POST',
        url: '/v1/embeddings',
        headers: auth,
        payload: { model: embedderId, input, ...extra },
      });
      expect(res.statusCode).toBe(200);
      return res.json<{ data: { embedding: number[] }[]; usage: { prompt_tokens: number } }>();
    };

    it('tokenises every golden text to the golden ids (with truncation to 512)', () => {
      const model = server.registry.list().find((m) => m.id === embedderId)!;
      for (const item of items) {
        expect(Array.from(model.tokenizer.single(model.tokenizer.encode(item.text), model.maxTokens))).toEqual(
          item.input_ids,
        );
      }
    });

    it('matches the normalised vectors one by one, and counts the tokens used', async () => {
      for (const item of items) {
        const body = await embed(item.text);
        expectClose(body.data[0]!.embedding, item.normalized);
        expect(body.usage.prompt_tokens).toBe(item.input_ids.length);
      }
    });

    it('matches them batched together, short and long inputs in one request', async () => {
      const body = await embed(items.map((item) => item.text));
      body.data.forEach((row, i) => expectClose(row.embedding, items[i]!.normalized));
    });

    it('matches the 128- and 64-dimension cuts, in float and base64', async () => {
      const texts = items.map((item) => item.text);
      const cut128 = await embed(texts, { dimensions: 128 });
      cut128.data.forEach((row, i) => expectClose(row.embedding, items[i]!.normalized_128));
      const cut64 = (await embed(texts, { dimensions: 64, encoding_format: 'base64' })) as unknown as {
        data: { embedding: string }[];
      };
      cut64.data.forEach((row, i) => {
        const bytes = Buffer.from(row.embedding, 'base64');
        expectClose(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4), items[i]!.normalized_64);
      });
    });

    it('gives a short input the same vector alone and beside much longer inputs', async () => {
      const short = items.reduce((a, b) => (a.input_ids.length <= b.input_ids.length ? a : b));
      const long = items.reduce((a, b) => (a.input_ids.length >= b.input_ids.length ? a : b));
      const alone = (await embed(short.text)).data[0]!.embedding;
      const batched = await embed([long.text, short.text, long.text]);
      let worst = 0;
      alone.forEach((x, i) => (worst = Math.max(worst, Math.abs(x - batched.data[1]!.embedding[i]!))));
      expect(worst).toBeLessThanOrEqual(1e-5);
    });

    it('gives the same vectors under concurrent requests that share batches', async () => {
      const results = await Promise.all(items.map((item) => embed(item.text)));
      results.forEach((body, i) => expectClose(body.data[0]!.embedding, items[i]!.normalized));
    });

    const rerank = async (target: Server, query: string, documents: string[]) => {
      const res = await target.app.inject({
        method: 'POST',
        url: '/v1/rerank',
        headers: auth,
        payload: { model: rerankerId, query, documents },
      });
      expect(res.statusCode).toBe(200);
      return res.json<{ results: { index: number; relevance_score: number }[] }>();
    };

    it('builds the golden pair ids and token types (longest_first truncation)', () => {
      const model = server.registry.list().find((m) => m.id === rerankerId)!;
      const all = golden<RerankItem & { token_type_ids: number[] }>(rerankerId).items;
      for (const pair of all) {
        const built = model.tokenizer.pair(
          model.tokenizer.encode(pair.query),
          model.tokenizer.encode(pair.document),
          model.maxTokens,
        );
        expect(Array.from(built.ids)).toEqual(pair.input_ids);
        expect(Array.from(built.typeIds)).toEqual(pair.token_type_ids);
      }
    });

    it('matches the golden scores one pair at a time, with truncation as the only window', async () => {
      for (const pair of pairs) {
        const body = await rerank(truncating, pair.query, [pair.document]);
        expect(Math.abs(body.results[0]!.relevance_score - pair.score)).toBeLessThanOrEqual(tolerance);
      }
    });

    it('matches them batched, and scores a long document by its best window (never below its first)', async () => {
      const query = pairs[0]!.query;
      const same = pairs.filter((p) => p.query === query);
      const body = await rerank(
        server,
        query,
        same.map((p) => p.document),
      );
      for (const result of body.results) {
        const pair = same[result.index]!;
        if (pair.truncated) expect(result.relevance_score).toBeGreaterThanOrEqual(pair.score - tolerance);
        else expect(Math.abs(result.relevance_score - pair.score)).toBeLessThanOrEqual(tolerance);
      }
      const scores = body.results.map((r) => r.relevance_score);
      expect([...scores].sort((a, b) => b - a)).toEqual(scores);
    });
  },
);
