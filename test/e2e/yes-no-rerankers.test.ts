/**
 * Yes/no rerankers against the golden scores of their stand-ins: Qwen3-Reranker's causal LM export,
 * served through its graph cut to the yes/no logits at the last token, and its
 * sequence-classification conversion; bge-reranker-v2-gemma's export, cut to the logit of "Yes".
 * Pulled by repo id from the stand-in Hub, each pair written in the reference's template (token ids
 * checked), on /v1/rerank and the Cohere and TEI routes, with the default and with a request's
 * instruction; long documents by their best window. The causal LM's graph with attention fused into
 * ONNX Runtime's GroupQueryAttention (as the repository's own graphs have it) is served from a folder
 * of its own, to the same golden scores.
 */
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { templatePairs } from '../../src/core/template-pairs.js';
import type { Server } from '../../src/main.js';
import { Catalogue } from '../../src/models/catalogue.js';
import { pullModel, pullTarget } from '../../src/models/download.js';
import { Hub } from '../../src/models/hub.js';
import { quantizeFile } from '../../src/quantize/graph.js';
import { repoFromFolder, startStandInHub, type StandInHub } from '../fixtures/stand-in-hub.js';
import { auth, startServer } from '../helpers/server.js';
import { missing } from '../helpers/resources.js';
import { standinCommit } from '../helpers/standins.js';

interface Pair {
  query: string;
  document: string;
  instruction?: string;
  input_ids: number[];
  logits: number[];
  score: number;
}
interface Golden {
  repo: string;
  form: 'causal-lm' | 'seq-cls';
  template: string;
  tolerance: number;
  window: number;
  instruction: string;
  rerank: Pair[];
  instructed: Pair[];
}

const dir = inject('standinsDir');
const standinsMissing = inject('standinsMissing');
const gemma = 'BAAI/bge-reranker-v2-gemma';
const repos = ['onnx-community/Qwen3-Reranker-0.6B-ONNX', 'tomaarsen/Qwen3-Reranker-0.6B-seq-cls', gemma];
const crossEncoder = 'BAAI/bge-reranker-base';
/** A folder of the causal LM's files with the fused-attention graph as its onnx/model.onnx. */
const fused = 'Qwen3-Reranker-0.6B-fused-attention';
const present = dir !== '' && [...repos, crossEncoder].every((repo) => existsSync(join(dir, repo, 'golden.json')));
const goldens = present
  ? repos.map((repo) => JSON.parse(readFileSync(join(dir, repo, 'golden.json'), 'utf8')) as Golden)
  : [];
/** The stand-in tokenizer's id of "Yes". */
const goldenYes = () =>
  (JSON.parse(readFileSync(join(dir, gemma, 'tokenizer.json'), 'utf8')) as { model: { vocab: Record<string, number> } })
    .model.vocab['Yes']!;

describe.skipIf(missing(present, `the yes/no reranker stand-ins could not be generated: ${standinsMissing}`))(
  'yes/no rerankers against golden scores',
  () => {
    const catalogue = Catalogue.load();
    const commitOf = (repo: string) => standinCommit(catalogue, repo);
    let hub: StandInHub;
    let modelsDir: string;
    /** One window per document, as the golden cuts them. */
    let server: Server;
    let dataDir: string;
    /** The default number of windows: long documents by their best. */
    let windowed: Server;
    /** The fused-attention graph, with batches of several pairs. */
    let batched: Server;
    beforeAll(async () => {
      const all = [...repos, crossEncoder];
      hub = await startStandInHub(
        await Promise.all(all.map((repo) => repoFromFolder(join(dir, repo), repo, commitOf(repo)))),
      );
      modelsDir = mkdtempSync(join(tmpdir(), 'onnx-gateway-yes-no-'));
      for (const repo of all)
        await pullModel(pullTarget(repo, catalogue, modelsDir)!, {
          modelsDir,
          hub: new Hub({ endpoint: hub.url }),
          retries: 0,
        });
      // The int8 variant as `models quantize --no-calibration` writes it (calibration feeds no decoder cache).
      const graphs = join(modelsDir, 'onnx-community', 'Qwen3-Reranker-0.6B-ONNX', 'onnx');
      await quantizeFile(join(graphs, 'model.onnx'), join(graphs, 'model_int8.onnx'));
      // bge-reranker-v2-gemma's folder takes no cut graph (as on a read-only mount; the path of the
      // partial file is taken, since root writes through modes): its cut goes to the data dir.
      const gemmaGraphs = join(modelsDir, 'BAAI', 'bge-reranker-v2-gemma', 'onnx');
      mkdirSync(join(gemmaGraphs, `model.answers-${goldenYes()}.onnx.partial`));
      chmodSync(gemmaGraphs, 0o555);
      const fusedDir = join(modelsDir, fused);
      mkdirSync(join(fusedDir, 'onnx'), { recursive: true });
      for (const file of readdirSync(join(dir, repos[0]!)))
        if (file.endsWith('.json') && file !== 'golden.json')
          copyFileSync(join(dir, repos[0]!, file), join(fusedDir, file));
      copyFileSync(join(dir, repos[0]!, 'onnx', 'model_gqa.onnx'), join(fusedDir, 'onnx', 'model.onnx'));
      dataDir = mkdtempSync(join(tmpdir(), 'onnx-gateway-data-'));
      server = await startServer({
        modelsDir,
        models: [...all, `${repos[0]}:int8`],
        workers: 1,
        rerankMaxChunks: 1,
        dataDir,
      });
      windowed = await startServer({ modelsDir, models: [repos[0]], workers: 1 });
      // A budget that takes several pairs (about 150 tokens each) in one batch.
      batched = await startServer({ modelsDir, models: [fused], workers: 1, rerankMaxChunks: 1, maxBatchTokens: 4096 });
    }, 300_000);
    afterAll(async () => {
      if (modelsDir) chmodSync(join(modelsDir, 'BAAI', 'bge-reranker-v2-gemma', 'onnx'), 0o755);
      await server?.close();
      await windowed?.close();
      await batched?.close();
      await hub?.close();
    });

    const post = async (url: string, payload: object, on = server) => {
      const res = await on.app.inject({ method: 'POST', url, headers: auth, payload });
      expect(res.statusCode, res.body).toBe(200);
      return res.json<unknown>();
    };
    const v1 = async (payload: object, on = server) =>
      (await post('/v1/rerank', payload, on)) as {
        results: { index: number; relevance_score: number; document?: { text: string } }[];
        usage: { total_tokens: number };
      };

    it('serves the causal LM through its cut graph, written once beside the graph', () => {
      const model = server.registry.resolve(repos[0], 'rerank');
      expect(model.onnxPath).toMatch(/onnx\/model\.answers-\d+-\d+\.onnx$/);
      expect(model.labels).toEqual(['yes', 'no']);
      expect(readdirSync(join(modelsDir, 'onnx-community', 'Qwen3-Reranker-0.6B-ONNX', 'onnx')).sort()).toEqual([
        'model.answers-4000-3868.onnx',
        'model.onnx',
        'model.onnx_data',
        'model_int8.answers-4000-3868.onnx',
        'model_int8.onnx',
      ]);
      const classifier = server.registry.resolve(repos[1], 'rerank');
      expect(classifier.onnxPath).toMatch(/onnx\/model\.onnx$/);
      expect(classifier.rerankTemplate?.name).toBe('qwen3-reranker');
    });

    it('serves bge-reranker-v2-gemma through its graph cut to the one logit of "Yes", in the data dir', () => {
      const model = server.registry.resolve(gemma, 'rerank');
      const yes = model.tokenizer.idOf('Yes')!;
      expect(yes).toBe(goldenYes());
      // Its folder could not be written: the cut is in the data dir, its weights read from the folder.
      expect(model.onnxPath.startsWith(join(dataDir, 'cut-graphs'))).toBe(true);
      expect(model.onnxPath.endsWith(`model.answers-${yes}.onnx`)).toBe(true);
      expect(model.externalDataDir).toBe(join(modelsDir, 'BAAI', 'bge-reranker-v2-gemma', 'onnx'));
      expect(model.labels).toEqual(['Yes']);
      expect(model.rerankTemplate?.name).toBe('bge-reranker-gemma');
      expect(model.rerankScoring).toEqual({ kind: 'sigmoid' });
    });

    it('refuses to pull bge-reranker-v2-gemma as the Hub has it (no ONNX), naming the export', async () => {
      const layout = await repoFromFolder(join(dir, gemma), gemma, commitOf(gemma));
      for (const path of [...layout.files.keys()]) if (path.startsWith('onnx/')) layout.files.delete(path);
      const bare = await startStandInHub([layout]);
      try {
        const into = mkdtempSync(join(tmpdir(), 'onnx-gateway-yes-no-'));
        await expect(
          pullModel(pullTarget(gemma, catalogue, into)!, {
            modelsDir: into,
            hub: new Hub({ endpoint: bare.url }),
            retries: 0,
          }),
        ).rejects.toThrow(
          /optimum-cli export onnx --model BAAI\/bge-reranker-v2-gemma --task text-generation-with-past/,
        );
      } finally {
        await bare.close();
      }
    });

    it('scores bge-reranker-v2-gemma as the sigmoid of its logit of "Yes"', async () => {
      const golden = goldens.find((g) => g.repo === gemma)!;
      const pair = golden.rerank[0]!;
      const res = await server.app.inject({
        method: 'POST',
        url: '/v1/rerank',
        headers: auth,
        payload: { model: gemma, query: pair.query, documents: [pair.document] },
      });
      expect(res.statusCode, res.body).toBe(200);
      const score = res.json<{ results: { relevance_score: number }[] }>().results[0]!.relevance_score;
      // The score is the sigmoid of the one logit (FlagLLMReranker's normalize=True).
      expect(Math.abs(score - 1 / (1 + Math.exp(-pair.logits[0]!)))).toBeLessThanOrEqual(golden.tolerance);
    });

    for (const golden of goldens) {
      describe(`${golden.repo} (${golden.form})`, () => {
        const all = [...golden.rerank, ...golden.instructed];

        it("writes each pair in the model card's template, to the golden ids", async () => {
          const model = server.registry.resolve(golden.repo, 'rerank');
          expect(model.maxTokens).toBe(golden.window);
          for (const pair of all) {
            const built = await templatePairs(
              model,
              model.rerankTemplate!,
              { query: pair.query, documents: [pair.document], instruction: pair.instruction },
              { overlap: 0, maxChunks: 1 },
            );
            expect(Array.from(built.inputs[0]!.ids), pair.query).toEqual(pair.input_ids);
          }
        });

        it('matches the golden scores pair by pair, on /v1/rerank, Cohere v2 and TEI', async () => {
          for (const pair of golden.rerank) {
            const body = await v1({ model: golden.repo, query: pair.query, documents: [pair.document] });
            expect(Math.abs(body.results[0]!.relevance_score - pair.score), pair.query).toBeLessThanOrEqual(
              golden.tolerance,
            );
            expect(body.usage.total_tokens).toBe(pair.input_ids.length);
            const cohere = (await post('/v2/rerank', {
              model: golden.repo,
              query: pair.query,
              documents: [pair.document],
            })) as { results: { relevance_score: number }[] };
            expect(Math.abs(cohere.results[0]!.relevance_score - pair.score)).toBeLessThanOrEqual(golden.tolerance);
          }
        });

        it('matches them batched, ranked, cut to top_n, with the documents returned', async () => {
          const pairs = golden.rerank.filter((p) => p.query === golden.rerank[0]!.query);
          const others = golden.rerank.filter((p) => p.query !== golden.rerank[0]!.query);
          const documents = [...pairs, ...others].map((p) => p.document);
          const body = await v1({ model: golden.repo, query: pairs[0]!.query, documents });
          expect(body.results).toHaveLength(documents.length);
          for (const result of body.results.filter((r) => r.index < pairs.length))
            expect(Math.abs(result.relevance_score - pairs[result.index]!.score)).toBeLessThanOrEqual(golden.tolerance);
          const scores = body.results.map((r) => r.relevance_score);
          expect(scores).toEqual([...scores].sort((a, b) => b - a));
          const top = await v1({
            model: golden.repo,
            query: pairs[0]!.query,
            documents,
            top_n: 2,
            return_documents: true,
          });
          expect(top.results).toEqual(
            body.results.slice(0, 2).map((r) => ({ ...r, document: { text: documents[r.index]! } })),
          );
        });

        it("follows a request's instruction, on every route", async () => {
          for (const pair of golden.instructed) {
            const payload = { model: golden.repo, query: pair.query, documents: [pair.document] };
            const body = await v1({ ...payload, instruction: pair.instruction });
            expect(Math.abs(body.results[0]!.relevance_score - pair.score), pair.instruction).toBeLessThanOrEqual(
              golden.tolerance,
            );
            const cohere = (await post('/v2/rerank', { ...payload, instruction: pair.instruction })) as {
              results: { relevance_score: number }[];
            };
            expect(Math.abs(cohere.results[0]!.relevance_score - pair.score)).toBeLessThanOrEqual(golden.tolerance);
            // The default instruction scores the same pair otherwise.
            const plain = await v1(payload);
            expect(Math.abs(plain.results[0]!.relevance_score - pair.score)).toBeGreaterThan(golden.tolerance);
          }
          // The model card's instruction, named, is the default.
          const first = golden.rerank[0]!;
          const named = await v1({
            model: golden.repo,
            query: first.query,
            documents: [first.document],
            instruction: golden.instruction,
          });
          expect(Math.abs(named.results[0]!.relevance_score - first.score)).toBeLessThanOrEqual(golden.tolerance);
        });
      });
    }

    it("answers TEI's /rerank with the scores and raw logits of the served reranker", async () => {
      const golden = goldens[0]!;
      const pair = golden.instructed[0]!;
      const res = await server.app.inject({
        method: 'POST',
        url: '/rerank',
        headers: auth,
        payload: { query: pair.query, texts: [pair.document], instruction: pair.instruction, raw_scores: true },
      });
      expect(res.statusCode, res.body).toBe(200);
      const [result] = res.json<{ index: number; score: number }[]>();
      // TEI's reranker is the first served: the causal LM; its raw score is logit(yes) - logit(no).
      expect(Math.abs(result!.score - (pair.logits[0]! - pair.logits[1]!))).toBeLessThanOrEqual(golden.tolerance * 10);
    });

    it('serves the int8 variant through its cut graph, its scores within int8 rounding of the golden', async () => {
      const golden = goldens[0]!;
      expect(server.registry.resolve(`${repos[0]}:int8`, 'rerank').onnxPath).toMatch(/model_int8\.answers-/);
      let worst = 0;
      for (const pair of [...golden.rerank, ...golden.instructed]) {
        const body = await v1({
          model: `${repos[0]}:int8`,
          query: pair.query,
          documents: [pair.document],
          instruction: pair.instruction,
        });
        worst = Math.max(worst, Math.abs(body.results[0]!.relevance_score - pair.score));
      }
      // Rounded to nearest, activations quantized at run time: 0.0044 on these pairs.
      expect(worst).toBeGreaterThan(0);
      expect(worst).toBeLessThan(0.02);
    });

    it('serves a graph with fused GroupQueryAttention at the golden scores, one pair at a time and batched', async () => {
      const golden = goldens[0]!;
      const model = batched.registry.resolve(fused, 'rerank');
      expect(model.onnxPath).toMatch(/onnx\/model\.answers-\d+-\d+\.onnx$/);
      // Positions come from the attention mask inside the fused node: the graph takes none.
      expect(model.feeds.positionIds).toBe(false);
      expect(model.feeds.pastKeyValues.length).toBeGreaterThan(0);
      const pairs = [...golden.rerank, ...golden.instructed];
      const score = async (pair: Pair) =>
        (
          await v1(
            { model: fused, query: pair.query, documents: [pair.document], instruction: pair.instruction },
            batched,
          )
        ).results[0]!.relevance_score;
      for (const pair of pairs)
        expect(Math.abs((await score(pair)) - pair.score), pair.query).toBeLessThanOrEqual(golden.tolerance);
      // All at once: the one worker takes rows of different lengths together, right-padded.
      const together = await Promise.all(pairs.map(score));
      together.forEach((got, i) =>
        expect(Math.abs(got - pairs[i]!.score), pairs[i]!.query).toBeLessThanOrEqual(golden.tolerance),
      );
      const same = golden.rerank.filter((p) => p.query === golden.rerank[0]!.query);
      const body = await v1({ model: fused, query: same[0]!.query, documents: same.map((p) => p.document) }, batched);
      for (const result of body.results)
        expect(Math.abs(result.relevance_score - same[result.index]!.score)).toBeLessThanOrEqual(golden.tolerance);
      // Batches of more than one row ran, and padded: rows of different lengths, right-padded together.
      const metrics = (await batched.app.inject({ method: 'GET', url: '/metrics' })).body;
      const value = (name: string) =>
        Number(new RegExp(`^onnx_gateway_${name}\\{model="${fused}"\\} (\\S+)$`, 'm').exec(metrics)?.[1]);
      expect(value('batch_size_count')).toBeLessThan(value('batch_size_sum'));
      expect(value('padded_tokens_total')).toBeGreaterThan(value('tokens_total'));
    });

    it('scores a document past the window by its best window', async () => {
      const golden = goldens[0]!;
      const long = golden.rerank.find((p) => p.input_ids.length === golden.window)!;
      const first = await v1({ model: golden.repo, query: long.query, documents: [long.document] });
      expect(Math.abs(first.results[0]!.relevance_score - long.score)).toBeLessThanOrEqual(golden.tolerance);
      const best = await v1({ model: golden.repo, query: long.query, documents: [long.document] }, windowed);
      // More than one window was scored, and the document scores as the best of them.
      expect(best.usage.total_tokens).toBeGreaterThan(golden.window);
      expect(best.results[0]!.relevance_score).toBeGreaterThanOrEqual(long.score - golden.tolerance);
    });

    it('refuses an instruction for a reranker that takes none, an empty one, and one that leaves no room', async () => {
      for (const [model, instruction, message] of [
        [crossEncoder, 'Judge relevance', /takes no instruction/],
        [repos[0], '', /instruction must not be empty/],
        // bge-reranker-v2-gemma's prompt is a fixed part of every pair: over half the window is refused.
        [gemma, 'Is passage B relevant? '.repeat(120), /fixed parts take \d+ tokens; at most 512 may/],
      ] as const) {
        const res = await server.app.inject({
          method: 'POST',
          url: '/v1/rerank',
          headers: auth,
          payload: { model, query: 'q', documents: ['d'], instruction },
        });
        expect(res.statusCode).toBe(400);
        expect(res.json<{ error: { param: string; message: string } }>().error).toMatchObject({
          param: 'instruction',
          message: expect.stringMatching(message) as string,
        });
      }
    });
  },
);
