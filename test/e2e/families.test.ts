/**
 * Every model family served exactly: for each exact-interface stand-in of a Hub model (the real
 * export's inputs and outputs, tokenizer and configs, with small random weights), pulled by repo
 * id from a stand-in Hub that serves its repository layout through the Hub's API, the server's
 * token ids, vectors and scores against golden outputs of an independent float64 numpy forward
 * pass (scripts/standins/), with the catalogue's facts, one input at a time and batched together.
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { promptFor } from '../../src/core/prompts.js';
import type { Server } from '../../src/main.js';
import { Catalogue } from '../../src/models/catalogue.js';
import { pullModel, PullRefusal, pullTarget } from '../../src/models/download.js';
import { Hub } from '../../src/models/hub.js';
import { readLock } from '../../src/models/lock.js';
import { repoFromFolder, startStandInHub, type StandInHub } from '../fixtures/stand-in-hub.js';
import { auth, startServer } from '../helpers/server.js';
import { listStandins, standinCommit } from '../helpers/standins.js';
import { missing } from '../helpers/resources.js';

interface EmbeddingItem {
  text: string;
  prompt_name: string | null;
  input_ids: number[];
  pooled: number[];
  normalized: number[];
}
interface RerankItem {
  query: string;
  document: string;
  input_ids: number[];
  logits: number[];
  score: number;
}
interface Golden {
  repo: string;
  family: string;
  task: 'embedding' | 'rerank' | 'classify';
  tolerance: number;
  normalize: boolean;
  window: number;
  embeddings?: EmbeddingItem[];
  matryoshka?: Record<string, number[][]>;
  rerank?: RerankItem[];
}

const dir = inject('standinsDir');
const standinsMissing = inject('standinsMissing');
const readGolden = (repo: string) => JSON.parse(readFileSync(join(dir, repo, 'golden.json'), 'utf8')) as Golden;
// The classifiers' stand-ins are served by test/e2e/classify.test.ts; the sparse and late-interaction
// ones have goldens of their own shape (test/e2e/sparse-colbert.test.ts).
const repos = (dir ? listStandins(dir) : []).filter((repo) => ['embedding', 'rerank'].includes(readGolden(repo).task));
const goldens: Golden[] = repos.map(readGolden);

function maxDifference(actual: ArrayLike<number>, expected: number[]): number {
  expect(actual.length).toBe(expected.length);
  let worst = 0;
  for (let i = 0; i < expected.length; i++) worst = Math.max(worst, Math.abs(actual[i]! - expected[i]!));
  return worst;
}

describe.skipIf(missing(dir !== '', `the family stand-ins could not be generated: ${standinsMissing}`))(
  `model families against golden outputs${dir ? '' : ` (${standinsMissing})`}`,
  () => {
    const catalogue = Catalogue.load();
    const commitOf = (repo: string) => standinCommit(catalogue, repo);
    let hub: StandInHub;
    let modelsDir: string;
    let server: Server;
    beforeAll(async () => {
      // BAAI/bge-reranker-v2-m3's repository has no ONNX export, as on the Hub.
      const layouts = [...repos, 'BAAI/bge-reranker-v2-m3'].filter((repo) => existsSync(join(dir, repo)));
      hub = await startStandInHub(
        await Promise.all(layouts.map((repo) => repoFromFolder(join(dir, repo), repo, commitOf(repo)))),
      );
      modelsDir = mkdtempSync(join(tmpdir(), 'onnx-gateway-families-'));
      for (const repo of repos)
        await pullModel(pullTarget(repo, catalogue, modelsDir)!, {
          modelsDir,
          hub: new Hub({ endpoint: hub.url }),
          retries: 0,
        });
      // One window per rerank pair, as the golden cuts pairs by longest_first.
      server = await startServer({ modelsDir, models: repos, workers: 1, rerankMaxChunks: 1 });
    }, 300_000);
    afterAll(async () => {
      await server?.close();
      await hub?.close();
    });

    it("pulled each repository by its id through the Hub's API, locked to the commit it served", () => {
      for (const repo of repos) {
        const [owner, name] = repo.split('/') as [string, string];
        const lock = readLock(join(modelsDir, owner, name));
        expect(lock, repo).toMatchObject({ repo, commit: commitOf(repo) });
        expect(Object.keys(lock!.variants), repo).toEqual(['fp32']);
        expect(
          lock!.files.map((f) => f.path),
          repo,
        ).toContain('tokenizer.json');
        expect(
          lock!.files.map((f) => f.path),
          repo,
        ).not.toContain('golden.json');
      }
      // External weights came with their graph.
      expect(readLock(join(modelsDir, 'BAAI', 'bge-m3'))!.files.map((f) => f.path)).toContain('onnx/model.onnx_data');
    });

    it("refuses a graph whose external data the repository lacks (found by the graph's own locations, not by name)", async () => {
      const layout = await repoFromFolder(join(dir, 'BAAI/bge-m3'), 'BAAI/bge-m3', commitOf('BAAI/bge-m3'));
      layout.files.delete('onnx/Constant_7_attr__value');
      const broken = await startStandInHub([layout]);
      try {
        const into = mkdtempSync(join(tmpdir(), 'onnx-gateway-families-'));
        const pull = pullModel(pullTarget('BAAI/bge-m3', catalogue, into)!, {
          modelsDir: into,
          hub: new Hub({ endpoint: broken.url }),
          retries: 0,
        });
        await expect(pull).rejects.toThrow(
          /onnx\/model\.onnx keeps weights in onnx\/Constant_7_attr__value, which the repository does not have/,
        );
        expect(existsSync(join(into, 'BAAI', 'bge-m3'))).toBe(false);
      } finally {
        await broken.close();
      }
    });

    it('refuses a repository without an ONNX export, naming the export command', async () => {
      const pull = pullModel(pullTarget('BAAI/bge-reranker-v2-m3', catalogue, modelsDir)!, {
        modelsDir,
        hub: new Hub({ endpoint: hub.url }),
        retries: 0,
      });
      await expect(pull).rejects.toThrow(PullRefusal);
      await expect(
        pullModel(pullTarget('BAAI/bge-reranker-v2-m3', catalogue, modelsDir)!, {
          modelsDir,
          hub: new Hub({ endpoint: hub.url }),
          retries: 0,
        }),
      ).rejects.toThrow(/optimum-cli export onnx --model BAAI\/bge-reranker-v2-m3 --task text-classification/);
      expect(existsSync(join(modelsDir, 'BAAI', 'bge-reranker-v2-m3'))).toBe(false);
    });

    it('serves each by its repo id: listed with its revision, found with the slash as it is or encoded, and by its catalogue alias', async () => {
      const get = (url: string) => server.app.inject({ method: 'GET', url, headers: auth });
      const listed = (await get('/v1/models')).json<{ data: { id: string; revision?: string }[] }>().data;
      expect(listed.map((m) => m.id).sort()).toEqual([...repos].sort());
      for (const model of listed) expect(model.revision, model.id).toBe(commitOf(model.id));
      for (const url of [
        '/v1/models/BAAI/bge-small-en-v1.5',
        '/v1/models/BAAI%2Fbge-small-en-v1.5',
        '/v1/models/bge-small-en-v1.5',
      ]) {
        expect((await get(url)).json(), url).toMatchObject({ id: 'BAAI/bge-small-en-v1.5', task: 'embedding' });
      }
      expect((await get('/v1/models/BAAI/nope')).statusCode).toBe(404);
      const engine = await server.app.inject({
        method: 'POST',
        url: '/v1/engines/BAAI/bge-small-en-v1.5/embeddings',
        headers: auth,
        payload: { input: 'hello' },
      });
      expect(engine.json()).toMatchObject({ model: 'BAAI/bge-small-en-v1.5' });
      const byAlias = await server.app.inject({
        method: 'POST',
        url: '/v1/embeddings',
        headers: auth,
        payload: { model: 'e5-small-v2', input: 'hello' },
      });
      expect(byAlias.json()).toMatchObject({ model: 'intfloat/e5-small-v2' });
    });

    it('refuses a prompt name the model does not declare', async () => {
      const res = await server.app.inject({
        method: 'POST',
        url: '/embed',
        headers: auth,
        payload: { inputs: 'hello', prompt_name: 'bogus' },
      });
      // TEI's status for bad input on its routes.
      expect(res.statusCode).toBe(422);
      expect(res.json<{ error: string }>().error).toMatch(/has no prompt named "bogus"/);
    });

    it('has a stand-in of every family', () => {
      expect(new Set(goldens.map((g) => g.family))).toEqual(
        new Set(['bert', 'mpnet', 'xlmr', 'nomic', 'modernbert', 'qwen3', 'gemma']),
      );
    });

    for (const golden of goldens.filter((g) => g.task === 'embedding')) {
      describe(`${golden.repo} (${golden.family})`, () => {
        const items = golden.embeddings!;
        const expected = (item: EmbeddingItem) => (golden.normalize ? item.normalized : item.pooled);
        const embed = async (input: string | string[], inputType: string | null, extra: object = {}) => {
          const payload = { model: golden.repo, input, ...(inputType ? { input_type: inputType } : {}), ...extra };
          const res = await server.app.inject({ method: 'POST', url: '/v1/embeddings', headers: auth, payload });
          expect(res.statusCode, res.body).toBe(200);
          return res.json<{ model: string; data: { embedding: number[] }[]; usage: { prompt_tokens: number } }>();
        };

        it('tokenises every text (its prompt first, cut to the window) to the golden ids', () => {
          const model = server.registry.resolve(golden.repo, 'embedding');
          expect(model.maxTokens).toBe(golden.window);
          for (const item of items) {
            const content = model.tokenizer.encode(promptFor(model, item.prompt_name ?? undefined) + item.text);
            expect(Array.from(model.tokenizer.single(content, model.maxTokens)), item.text).toEqual(item.input_ids);
          }
        });

        it('matches the golden vectors one by one, with the tokens counted', async () => {
          for (const item of items) {
            const body = await embed(item.text, item.prompt_name);
            expect(body.model).toBe(golden.repo);
            expect(maxDifference(body.data[0]!.embedding, expected(item)), item.text).toBeLessThanOrEqual(
              golden.tolerance,
            );
            expect(body.usage.prompt_tokens, item.text).toBe(item.input_ids.length);
          }
        });

        it('matches them batched together, short and long inputs in one request', async () => {
          for (const prompt of new Set(items.map((i) => i.prompt_name))) {
            const group = items.filter((i) => i.prompt_name === prompt);
            const body = await embed(
              group.map((i) => i.text),
              prompt,
            );
            group.forEach((item, i) =>
              expect(maxDifference(body.data[i]!.embedding, expected(item)), item.text).toBeLessThanOrEqual(
                golden.tolerance,
              ),
            );
          }
        });

        if (golden.matryoshka)
          it('matches the Matryoshka cuts, each normalised', async () => {
            for (const [dimensions, vectors] of Object.entries(golden.matryoshka ?? {})) {
              for (const [i, item] of items.entries()) {
                const body = await embed(item.text, item.prompt_name, { dimensions: Number(dimensions) });
                expect(
                  maxDifference(body.data[0]!.embedding, vectors[i]!),
                  `${dimensions}: ${item.text}`,
                ).toBeLessThanOrEqual(golden.tolerance);
              }
            }
          });
      });
    }

    for (const golden of goldens.filter((g) => g.task === 'rerank')) {
      describe(`${golden.repo} (${golden.family} reranker)`, () => {
        const rerank = async (query: string, documents: string[]) => {
          const res = await server.app.inject({
            method: 'POST',
            url: '/v1/rerank',
            headers: auth,
            payload: { model: golden.repo, query, documents },
          });
          expect(res.statusCode, res.body).toBe(200);
          return res.json<{ results: { index: number; relevance_score: number }[] }>();
        };

        it('matches the golden scores pair by pair', async () => {
          for (const pair of golden.rerank!) {
            const body = await rerank(pair.query, [pair.document]);
            expect(Math.abs(body.results[0]!.relevance_score - pair.score), pair.query).toBeLessThanOrEqual(
              golden.tolerance,
            );
          }
        });

        it('matches them with the documents of one query ranked together', async () => {
          const query = golden.rerank![0]!.query;
          const pairs = golden.rerank!.filter((p) => p.query === query);
          const body = await rerank(
            query,
            pairs.map((p) => p.document),
          );
          for (const result of body.results) {
            expect(Math.abs(result.relevance_score - pairs[result.index]!.score)).toBeLessThanOrEqual(golden.tolerance);
          }
        });
      });
    }
  },
);
