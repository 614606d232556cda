/**
 * Sparse and late-interaction models served exactly: the SPLADE stand-in (a BERT masked-LM head)
 * and the ColBERT stand-in (a BERT with PyLate's projection) from scripts/standins/, served from
 * their folders, against golden outputs of an independent float64 numpy forward pass:
 * TEI's /embed_sparse and /embed_all, /v1/embeddings with encoding_format sparse and top_k,
 * /v1/rerank by MaxSim; a bge-m3 export's dense vectors and lexical weights from one graph;
 * beside them a dense embedder's token vectors and the refusals.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Server } from '../../src/main.js';
import type { EmbeddingList, ErrorBody, ModelCard, RerankList, TeiError } from '../helpers/bodies.js';
import { auth, startServer, testKey } from '../helpers/server.js';
import { missing } from '../helpers/resources.js';
import { expectConforms } from '../helpers/specs.js';

const SPLADE = 'prithivida/Splade_PP_en_v1';
const COLBERT = 'answerdotai/answerai-colbert-small-v1';
const DENSE = 'BAAI/bge-small-en-v1.5';
const M3 = 'aapot/bge-m3-onnx';

interface SparseGolden {
  tolerance: number;
  sparse: Array<{ text: string; input_ids: number[]; indices: number[]; values: number[] }>;
}
interface ColbertGolden {
  tolerance: number;
  queries: Array<{ text: string; input_ids: number[]; attended: number; vectors: number[][] }>;
  documents: Array<{ text: string; input_ids: number[]; kept: number[]; vectors: number[][] }>;
  scores: Array<{ query: string; document: string; score: number }>;
}

const dir = inject('standinsDir');
const present = dir !== '' && [SPLADE, COLBERT, DENSE, M3].every((repo) => existsSync(join(dir, repo, 'golden.json')));
const read = <T>(repo: string): T => JSON.parse(readFileSync(join(dir, repo, 'golden.json'), 'utf8')) as T;

/** Largest difference between two sparse vectors, an index missing on one side counting as 0. */
function sparseDifference(
  indices: number[],
  values: number[],
  expected: { indices: number[]; values: number[] },
): number {
  const a = new Map(indices.map((index, i) => [index, values[i]!]));
  const b = new Map(expected.indices.map((index, i) => [index, expected.values[i]!]));
  let worst = 0;
  for (const index of new Set([...a.keys(), ...b.keys()]))
    worst = Math.max(worst, Math.abs((a.get(index) ?? 0) - (b.get(index) ?? 0)));
  return worst;
}

function matrixDifference(actual: number[][], expected: number[][]): number {
  expect(actual.length).toBe(expected.length);
  let worst = 0;
  actual.forEach((row, i) => row.forEach((x, j) => (worst = Math.max(worst, Math.abs(x - expected[i]![j]!)))));
  return worst;
}

describe.skipIf(missing(present, `the stand-ins could not be generated: ${inject('standinsMissing')}`))(
  'sparse and late-interaction models against golden outputs',
  () => {
    let server: Server;
    const post = (url: string, payload: object) => server.app.inject({ method: 'POST', url, headers: auth, payload });

    beforeAll(async () => {
      // TEI's routes: the dense embedder for /embed, the SPLADE model for /embed_sparse, the ColBERT model (listed first) for /embed_all.
      server = await startServer({
        modelsDir: dir,
        models: [DENSE, SPLADE, COLBERT, M3],
        teiModels: [COLBERT, SPLADE, DENSE],
        workers: 1,
      });
    }, 120_000);
    afterAll(async () => {
      await server?.close();
    });

    describe(`${SPLADE} (SPLADE)`, () => {
      const golden = present ? read<SparseGolden>(SPLADE) : ({ sparse: [], tolerance: 0 } as SparseGolden);

      it('is served as a sparse-only embedder over its vocabulary', () => {
        const model = server.registry.resolve(SPLADE, 'embedding');
        expect(model.heads).toMatchObject({
          kinds: ['sparse'],
          sparse: { pooling: 'mlm', output: 'logits', dimension: 30522 },
        });
        for (const item of golden.sparse)
          expect(
            Array.from(model.tokenizer.single(model.tokenizer.encode(item.text), model.maxTokens)),
            item.text,
          ).toEqual(item.input_ids);
      });

      it("matches the golden weights through TEI's /embed_sparse, all inputs in one request, nonzeros only, by index", async () => {
        const res = await post('/embed_sparse', { inputs: golden.sparse.map((item) => item.text) });
        expect(res.statusCode, res.body).toBe(200);
        expectConforms('tei', 'EmbedSparseResponse', res.json());
        const body = res.json<Array<Array<{ index: number; value: number }>>>();
        golden.sparse.forEach((item, i) => {
          const row = body[i]!;
          const indices = row.map((entry) => entry.index);
          expect(indices, item.text).toEqual([...indices].sort((a, b) => a - b));
          expect(
            row.every((entry) => entry.value > 0),
            item.text,
          ).toBe(true);
          expect(
            sparseDifference(
              indices,
              row.map((e) => e.value),
              item,
            ),
            item.text,
          ).toBeLessThanOrEqual(golden.tolerance);
        });
      });

      it('matches them through /v1/embeddings with encoding_format sparse, one by one, and cuts to top_k', async () => {
        for (const item of golden.sparse) {
          const res = await post('/v1/embeddings', { model: SPLADE, input: item.text, encoding_format: 'sparse' });
          expect(res.statusCode, res.body).toBe(200);
          const { indices, values } = res.json<EmbeddingList>().data[0]!.embedding as {
            indices: number[];
            values: number[];
          };
          expect(sparseDifference(indices, values, item), item.text).toBeLessThanOrEqual(golden.tolerance);
          expect(res.json<EmbeddingList>().usage.prompt_tokens).toBe(item.input_ids.length);
        }
        const item = golden.sparse.find((i) => i.indices.length > 10)!;
        const res = await post('/v1/embeddings', {
          model: SPLADE,
          input: item.text,
          encoding_format: 'sparse',
          top_k: 5,
        });
        const { indices, values } = res.json<EmbeddingList>().data[0]!.embedding as {
          indices: number[];
          values: number[];
        };
        const largest = item.indices
          .map((index, i) => ({ index, value: item.values[i]! }))
          .sort((a, b) => b.value - a.value)
          .slice(0, 5);
        expect(indices).toEqual(largest.map((e) => e.index).sort((a, b) => a - b));
        expect(values.length).toBe(5);
      });

      it("answers the openai SDK's embeddings.create with encoding_format sparse (our extension) as it came", async () => {
        const address = await server.app.listen({ port: 0, host: '127.0.0.1' });
        const client = new OpenAI({ baseURL: `${address}/v1`, apiKey: testKey, maxRetries: 0 });
        const item = golden.sparse[0]!;
        // The SDK's types know float and base64 only; it passes other formats through and leaves the embedding as sent.
        const body = await client.embeddings.create({
          model: SPLADE,
          input: [item.text],
          encoding_format: 'sparse',
          top_k: 3,
        } as never);
        const embedding = body.data[0]!.embedding as unknown as { indices: number[]; values: number[] };
        expect(embedding.indices).toHaveLength(3);
        expect(embedding.values).toHaveLength(3);
        const largest = [...item.values].sort((a, b) => b - a).slice(0, 3);
        [...embedding.values]
          .sort((a, b) => b - a)
          .forEach((value, i) => expect(Math.abs(value - largest[i]!)).toBeLessThanOrEqual(golden.tolerance));
      });

      it('ships only the nonzero weights of a 512-token input across the thread boundary', async () => {
        const long = golden.sparse.find((item) => item.input_ids.length === 512)!;
        const model = server.registry.resolve(SPLADE, 'embedding');
        const job = await server.engine.scheduler.submit(
          model.id,
          [{ ids: Int32Array.from(long.input_ids) }],
          undefined,
          'sparse',
        );
        const shipped = job.output.byteLength + job.indices!.byteLength + job.counts!.byteLength;
        const nonzero = job.counts![0]!;
        expect(Math.abs(nonzero - long.indices.length)).toBeLessThanOrEqual(2);
        // An index and a value per nonzero weight, and the row's count; the logits would be 512 x 30522 float32 (62.5 MB).
        expect(shipped).toBe(nonzero * 8 + 4);
        expect(shipped).toBeLessThan((512 * 30522 * 4) / 1000);
      });

      it('lists each model with the kinds of vector it gives', async () => {
        const get = async (id: string) =>
          (await server.app.inject({ method: 'GET', url: `/v1/models/${id}`, headers: auth })).json<ModelCard>();
        expect(await get(SPLADE)).toMatchObject({ task: 'embedding', outputs: ['sparse'], dimensions: 30522 });
        expect(await get(COLBERT)).toMatchObject({ task: 'embedding', outputs: ['tokens'], late_interaction: true });
        expect(await get(M3)).toMatchObject({ outputs: ['dense', 'sparse'] });
        expect(await get(DENSE)).toMatchObject({ outputs: ['dense', 'tokens'] });
        expect(await get(DENSE)).not.toHaveProperty('late_interaction');
      });

      it('refuses what a sparse model can not give, and bad top_k, with 400s', async () => {
        const dense = await post('/v1/embeddings', { model: SPLADE, input: 'hello' });
        expect(dense.statusCode).toBe(400);
        expect(dense.json<ErrorBody>().error).toMatchObject({ code: 'invalid_request', param: 'model' });
        expect(dense.json<ErrorBody>().error.message).toMatch(/does not give dense vectors; it gives sparse/);
        const sparseOfDense = await post('/v1/embeddings', { model: DENSE, input: 'hello', encoding_format: 'sparse' });
        expect(sparseOfDense.statusCode).toBe(400);
        expect(sparseOfDense.json<ErrorBody>().error.message).toMatch(/does not give sparse vectors/);
        for (const topK of [0, -1, 1.5, 'three']) {
          const res = await post('/v1/embeddings', {
            model: SPLADE,
            input: 'hello',
            encoding_format: 'sparse',
            top_k: topK,
          });
          expect(res.statusCode, String(topK)).toBe(400);
        }
        const topKOfFloat = await post('/v1/embeddings', { model: DENSE, input: 'hello', top_k: 3 });
        expect(topKOfFloat.statusCode).toBe(400);
        expect(topKOfFloat.json<ErrorBody>().error.param).toBe('top_k');
        const empty = await post('/embed_sparse', { inputs: [''] });
        expect(empty.statusCode).toBe(400);
        expect(empty.json()).toMatchObject({ error_type: 'Empty' });
        const ids = await post('/v1/embeddings', {
          model: SPLADE,
          input: [[101, 99999999]],
          encoding_format: 'sparse',
        });
        expect(ids.statusCode).toBe(400);
        // The worker is alive after all that.
        expect((await post('/embed_sparse', { inputs: 'hello' })).statusCode).toBe(200);
      });

      it('bounds the answer before inference: each vector may weigh all 30,522 entries, so 60 inputs could pass 64 MB; top_k bounds it', async () => {
        const inputs = Array.from({ length: 60 }, (_, i) => `text number ${i}`);
        const tei = await post('/embed_sparse', { inputs });
        expect(tei.statusCode).toBe(413);
        expect(tei.json()).toMatchObject({ code: 'response_too_large', error_type: 'Validation' });
        expect(tei.json<{ error: string }>().error).toMatch(
          /up to [\d.]+ MB of sparse vectors \(60 inputs, up to 1,831,320 weights \(each vector may weigh all 30,522 vocabulary entries; top_k bounds it\)\); this server sends at most 64\.0 MB/,
        );
        const v1 = await post('/v1/embeddings', { model: SPLADE, input: inputs, encoding_format: 'sparse' });
        expect(v1.statusCode).toBe(413);
        expect(v1.json<ErrorBody>().error).toMatchObject({ code: 'response_too_large', param: 'input' });
        const bounded = await post('/v1/embeddings', {
          model: SPLADE,
          input: inputs,
          encoding_format: 'sparse',
          top_k: 100,
        });
        expect(bounded.statusCode).toBe(200);
        expect(bounded.json<EmbeddingList>().data).toHaveLength(60);
      });

      it("answers TEI's /embed with 424 Backend where the TEI model is a SPLADE model alone, as TEI does", async () => {
        const spladeOnly = await startServer({ modelsDir: dir, models: [SPLADE], teiModels: [SPLADE], workers: 1 });
        try {
          const inject = (url: string) =>
            spladeOnly.app.inject({ method: 'POST', url, headers: auth, payload: { inputs: 'hello' } });
          const dense = await inject('/embed');
          expect(dense.statusCode).toBe(424);
          expect(dense.json<TeiError>()).toMatchObject({ error_type: 'Backend', code: 'invalid_request' });
          expect(dense.json<TeiError>().error).toMatch(
            /does not give dense vectors; it gives sparse \(.*\/embed_sparse\)/,
          );
          expect((await inject('/embed_sparse')).statusCode).toBe(200);
        } finally {
          await spladeOnly.close();
        }
      });
    });

    describe(`${COLBERT} (ColBERT)`, () => {
      const golden = present
        ? read<ColbertGolden>(COLBERT)
        : ({ queries: [], documents: [], scores: [], tolerance: 0 } as ColbertGolden);

      it('encodes queries with their marker and [MASK] expansion, documents with theirs', async () => {
        const { encodeDocument, encodeQuery } = await import('../../src/core/late-interaction.js');
        const model = server.registry.resolve(COLBERT, 'embedding');
        for (const query of golden.queries) {
          const input = encodeQuery(model, query.text);
          expect(Array.from(input.ids), query.text).toEqual(query.input_ids);
          expect(input.attended ?? input.ids.length, query.text).toBe(query.attended);
        }
        for (const doc of golden.documents)
          expect(Array.from(encodeDocument(model, model.tokenizer.encode(doc.text))[0]!.ids), doc.text).toEqual(
            doc.input_ids,
          );
      });

      it("matches the golden token vectors through TEI's /embed_all (prompt_name query / document)", async () => {
        const queries = await post('/embed_all', { inputs: golden.queries.map((q) => q.text), prompt_name: 'query' });
        expect(queries.statusCode, queries.body).toBe(200);
        expectConforms('tei', 'EmbedAllResponse', queries.json());
        golden.queries.forEach((query, i) =>
          expect(matrixDifference(queries.json<number[][][]>()[i]!, query.vectors), query.text).toBeLessThanOrEqual(
            golden.tolerance,
          ),
        );
        const documents = await post('/embed_all', { inputs: golden.documents.map((d) => d.text) });
        expect(documents.statusCode, documents.body).toBe(200);
        golden.documents.forEach((doc, i) =>
          expect(matrixDifference(documents.json<number[][][]>()[i]!, doc.vectors), doc.text).toBeLessThanOrEqual(
            golden.tolerance,
          ),
        );
      });

      it('reranks through /v1/rerank by MaxSim, the golden scores in the golden order', async () => {
        for (const query of new Set(golden.scores.map((s) => s.query))) {
          const pairs = golden.scores.filter((s) => s.query === query);
          const res = await post('/v1/rerank', { model: COLBERT, query, documents: pairs.map((p) => p.document) });
          expect(res.statusCode, res.body).toBe(200);
          const results = res.json<RerankList>().results;
          for (const result of results)
            expect(Math.abs(result.relevance_score - pairs[result.index]!.score), query).toBeLessThanOrEqual(
              golden.tolerance * 10,
            );
          expect(results.map((r) => r.index)).toEqual(
            pairs
              .map((p, index) => ({ index, score: p.score }))
              .sort((a, b) => b.score - a.score)
              .map((p) => p.index),
          );
        }
      });

      it('scores a document over the window as its best window', async () => {
        const long = golden.documents.find((d) => d.input_ids.length === 300)!;
        const tail = long.text.slice(Math.floor(long.text.length * 0.8));
        const query = 'battery chemistry';
        const res = await post('/v1/rerank', { model: COLBERT, query, documents: [long.text, tail] });
        expect(res.statusCode, res.body).toBe(200);
        const body = res.json<RerankList>();
        const byIndex = new Map(body.results.map((r) => [r.index, r.relevance_score]));
        // The whole document has a window over its tail, so it scores at least as the tail's best part can.
        expect(byIndex.get(0)!).toBeGreaterThan(0);
        expect(byIndex.size).toBe(2);
      });

      it('refuses dense and sparse requests of a ColBERT model', async () => {
        const dense = await post('/v1/embeddings', { model: COLBERT, input: 'hello' });
        expect(dense.statusCode).toBe(400);
        expect(dense.json<ErrorBody>().error.message).toMatch(/gives tokens/);
        // TEI's statuses on TEI's routes: bad input is 422 Validation.
        const ids = await post('/embed_all', { inputs: [[101, 102]] });
        expect(ids.statusCode).toBe(422);
        const long = golden.documents.find((d) => d.input_ids.length === 300)!.text;
        const untruncated = await post('/embed_all', { inputs: long, truncate: false });
        expect(untruncated.statusCode).toBe(422);
        expect(untruncated.json()).toMatchObject({ code: 'input_too_long', error_type: 'Validation' });
        const query = await post('/embed_all', { inputs: 'a short query', prompt_name: 'query', truncate: false });
        expect(query.statusCode).toBe(200);
        expect(query.json<number[][][]>()[0]).toHaveLength(32);
      });
    });

    describe(`${M3} (bge-m3's dense and lexical outputs)`, () => {
      const golden = present
        ? read<SparseGolden & { embeddings: Array<{ text: string; normalized: number[] }> }>(M3)
        : undefined;

      it('gives its dense vectors and its token weights, each matching the golden', async () => {
        const model = server.registry.resolve(M3, 'embedding');
        expect(model.heads).toMatchObject({
          kinds: ['dense', 'sparse'],
          sparse: { pooling: 'weights', output: 'sparse_vecs' },
        });
        const texts = golden!.sparse.map((item) => item.text);
        const sparse = await post('/v1/embeddings', { model: M3, input: texts, encoding_format: 'sparse' });
        expect(sparse.statusCode, sparse.body).toBe(200);
        golden!.sparse.forEach((item, i) => {
          const { indices, values } = sparse.json<EmbeddingList>().data[i]!.embedding as {
            indices: number[];
            values: number[];
          };
          expect(sparseDifference(indices, values, item), item.text).toBeLessThanOrEqual(golden!.tolerance);
        });
        const dense = await post('/v1/embeddings', { model: M3, input: texts });
        expect(dense.statusCode, dense.body).toBe(200);
        golden!.embeddings.slice(0, texts.length).forEach((item, i) => {
          const vector = dense.json<EmbeddingList>().data[i]!.embedding as number[];
          expect(Math.max(...vector.map((x, d) => Math.abs(x - item.normalized[d]!))), item.text).toBeLessThanOrEqual(
            golden!.tolerance,
          );
        });
      });
    });

    describe(`${DENSE} token vectors`, () => {
      it('gives its last hidden state per token through the core, special tokens included', async () => {
        const { embedTokens } = await import('../../src/core/token-embeddings.js');
        const { embed } = await import('../../src/core/embeddings.js');
        const core = {
          registry: server.registry,
          scheduler: server.engine.scheduler,
          limits: { maxInputs: 16, maxInputChars: 1000, truncate: true, rerankMaxChunks: 1, rerankChunkOverlap: 0 },
        };
        const tokens = await embedTokens(core, {
          model: DENSE,
          input: ['hello world', 'What is the capital of France?'],
        });
        const dense = await embed(core, {
          model: DENSE,
          input: ['hello world', 'What is the capital of France?'],
          normalize: false,
        });
        expect(tokens.rows[0]!.length / tokens.width).toBe(4);
        // bge-small pools by CLS: the first token vector is the unnormalised sentence vector.
        tokens.rows.forEach((row, i) => {
          const cls = row.subarray(0, tokens.width);
          const pooled = dense.vectors.subarray(i * dense.dimensions, (i + 1) * dense.dimensions);
          let worst = 0;
          cls.forEach((x, d) => (worst = Math.max(worst, Math.abs(x - pooled[d]!))));
          expect(worst).toBeLessThan(1e-5);
        });
      });
    });
  },
);
