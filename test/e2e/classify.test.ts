/**
 * Sequence classification and moderation against golden outputs: the stand-ins of a multi-label
 * moderation classifier (Xenova/toxic-bert, a sigmoid per label) and a two-label one
 * (Xenova/distilbert-base-uncased-finetuned-sst-2-english, softmax), pulled through the stand-in
 * Hub, their scores checked against an independent float64 numpy forward pass
 * (scripts/standins/families/classifiers.py) on /v1/classify, TEI's /predict (texts, pairs, batches,
 * raw scores) and /v1/moderations through OpenAI's client, with the bad inputs each refuses.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Server } from '../../src/main.js';
import { Catalogue, moderationCategories } from '../../src/models/catalogue.js';
import { pullModel, pullTarget } from '../../src/models/download.js';
import { Hub } from '../../src/models/hub.js';
import { repoFromFolder, startStandInHub, type StandInHub } from '../fixtures/stand-in-hub.js';
import type { ErrorBody } from '../helpers/bodies.js';
import { missing } from '../helpers/resources.js';
import { standinCommit } from '../helpers/standins.js';
import { auth, startServer, testKey } from '../helpers/server.js';
import { expectConforms, specDocument } from '../helpers/specs.js';

interface ClassifyItem {
  text: string;
  text_pair: string | null;
  input_ids: number[];
  logits: number[];
  scores: number[];
}
interface Golden {
  repo: string;
  tolerance: number;
  labels: string[];
  activation: 'softmax' | 'sigmoid';
  classify: ClassifyItem[];
}

/** An answer of /v1/classify. */
interface ClassifyList {
  id: string;
  object: 'list';
  model: string;
  data: { index: number; label: string; probs: number[]; num_classes: number }[];
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}
/** TEI's /predict: an input's labels, best first. */
type Predictions = { label: string; score: number }[];

const dir = inject('standinsDir');
const standinsMissing = inject('standinsMissing');
const TOXIC = 'Xenova/toxic-bert';
const SST2 = 'Xenova/distilbert-base-uncased-finetuned-sst-2-english';
const RERANKER = 'BAAI/bge-reranker-base';
const threshold = 0.8;
const golden = (repo: string) => JSON.parse(readFileSync(join(dir, repo, 'golden.json'), 'utf8')) as Golden;

function expectClose(actual: number[], expected: number[], tolerance: number, what: string): void {
  expect(actual.length, what).toBe(expected.length);
  for (let i = 0; i < expected.length; i++)
    expect(Math.abs(actual[i]! - expected[i]!), `${what} [${i}]`).toBeLessThanOrEqual(tolerance);
}

describe.skipIf(missing(dir !== '', `the stand-ins could not be generated: ${standinsMissing}`))(
  'classification and moderation against golden outputs',
  () => {
    const catalogue = Catalogue.load();
    let hub: StandInHub;
    let server: Server;
    let modelsDir: string;
    const commitOf = (repo: string) => standinCommit(catalogue, repo);
    const post = async (url: string, payload: unknown) =>
      server.app.inject({ method: 'POST', url, headers: auth, payload: payload as object });

    beforeAll(async () => {
      const repos = [TOXIC, SST2, RERANKER];
      hub = await startStandInHub(
        await Promise.all(repos.map((repo) => repoFromFolder(join(dir, repo), repo, commitOf(repo)))),
      );
      modelsDir = mkdtempSync(join(tmpdir(), 'onnx-gateway-classify-'));
      for (const repo of repos)
        await pullModel(pullTarget(repo, catalogue, modelsDir)!, {
          modelsDir,
          hub: new Hub({ endpoint: hub.url }),
          retries: 0,
        });
      // toxic-bert's manifest with a threshold of 0.8, which the stand-in's scores straddle (0.5 flags every text).
      const manifestsDir = mkdtempSync(join(tmpdir(), 'onnx-gateway-manifests-'));
      const manifest = catalogue.get('toxic-bert')!;
      writeFileSync(
        join(manifestsDir, 'toxic-bert.json'),
        JSON.stringify({ ...manifest, moderation: { ...manifest.moderation, threshold }, verified: 'none' }),
      );
      server = await startServer({ modelsDir, models: repos, workers: 1, teiModels: [TOXIC], manifestsDir });
    }, 120_000);
    afterAll(async () => {
      await server?.close();
      await hub?.close();
    });

    it('serves the classifiers as classify models with their labels, the cross-encoder as a reranker', async () => {
      const listed = (await server.app.inject({ method: 'GET', url: '/v1/models', headers: auth })).json<{
        data: { id: string; task: string; labels?: string[] }[];
      }>().data;
      expect(listed.find((m) => m.id === TOXIC)).toMatchObject({ task: 'classify', labels: golden(TOXIC).labels });
      expect(listed.find((m) => m.id === SST2)).toMatchObject({ task: 'classify', labels: ['NEGATIVE', 'POSITIVE'] });
      expect(listed.find((m) => m.id === RERANKER)).toMatchObject({ task: 'rerank' });
      expect(server.registry.resolve(TOXIC, 'classify').activation).toBe('sigmoid');
      expect(server.registry.resolve(SST2, 'classify').activation).toBe('softmax');
    });

    for (const repo of [TOXIC, SST2]) {
      describe(`${repo} on /v1/classify`, () => {
        const texts = () => golden(repo).classify.filter((item) => item.text_pair === null);

        it('matches the golden scores one text at a time: every label, the top label, the tokens', async () => {
          const { labels, tolerance } = golden(repo);
          for (const item of texts()) {
            const res = await post('/v1/classify', { model: repo, input: item.text });
            expect(res.statusCode, res.body).toBe(200);
            const body = res.json<ClassifyList>();
            expect(body).toMatchObject({
              object: 'list',
              model: repo,
              usage: { prompt_tokens: item.input_ids.length, completion_tokens: 0 },
            });
            expect(body.id).toMatch(/^classify-/);
            const data = body.data[0]!;
            expectClose(data.probs, item.scores, tolerance, item.text);
            expect(data.num_classes).toBe(labels.length);
            expect(data.label).toBe(labels[item.scores.indexOf(Math.max(...item.scores))]);
          }
        });

        it('matches them batched in one request, and gives the logits for raw_scores', async () => {
          const items = texts();
          const { tolerance } = golden(repo);
          const scored = (
            await post('/v1/classify', { model: repo, input: items.map((i) => i.text) })
          ).json<ClassifyList>();
          const raw = (
            await post('/v1/classify', { model: repo, input: items.map((i) => i.text), raw_scores: true })
          ).json<ClassifyList>();
          items.forEach((item, i) => {
            expect(scored.data[i]!.index).toBe(i);
            expectClose(scored.data[i]!.probs, item.scores, tolerance, item.text);
            expectClose(raw.data[i]!.probs, item.logits, tolerance, item.text);
          });
          expect(scored.usage.prompt_tokens).toBe(items.reduce((sum, item) => sum + item.input_ids.length, 0));
        });
      });
    }

    describe("TEI's /predict (the TEI classifier: Xenova/toxic-bert)", () => {
      const gold = () => golden(TOXIC);
      const sorted = (item: ClassifyItem, values: number[]) =>
        gold()
          .labels.map((label, i) => ({ label, score: values[i]! }))
          .sort((a, b) => b.score - a.score);
      const expectPredictions = (
        actual: Array<{ label: string; score: number }>,
        expected: Array<{ label: string; score: number }>,
        what: string,
      ) => {
        expect(
          actual.map((p) => p.label),
          what,
        ).toEqual(expected.map((p) => p.label));
        expectClose(
          actual.map((p) => p.score),
          expected.map((p) => p.score),
          gold().tolerance,
          what,
        );
      };

      it('answers a single text with its labels, best first', async () => {
        const item = gold().classify[0]!;
        const res = await post('/predict', { inputs: item.text });
        expect(res.statusCode, res.body).toBe(200);
        expectPredictions(res.json<Predictions>(), sorted(item, item.scores), item.text);
        expectConforms('tei', 'PredictResponse', res.json());
      });

      it('answers a batch with a list per input, and raw_scores with the logits', async () => {
        const items = gold().classify.filter((item) => item.text_pair === null);
        const batch = (await post('/predict', { inputs: items.map((i) => i.text) })).json<Predictions[]>();
        const raw = (await post('/predict', { inputs: items.map((i) => i.text), raw_scores: true })).json<
          Predictions[]
        >();
        items.forEach((item, i) => {
          expectPredictions(batch[i]!, sorted(item, item.scores), item.text);
          expectPredictions(raw[i]!, sorted(item, item.logits), item.text);
        });
      });

      it("describes the classifier in /info and answers TEI's default route as /predict", async () => {
        const info = (await server.app.inject({ method: 'GET', url: '/info', headers: auth })).json<unknown>();
        expect(info).toMatchObject({
          model_id: TOXIC,
          model_type: { classifier: { id2label: { 0: 'toxic', 5: 'identity_hate' }, label2id: { threat: 3 } } },
        });
        const item = gold().classify[1]!;
        const root = await post('/', { inputs: item.text });
        expect(root.statusCode, root.body).toBe(200);
        expectPredictions(root.json<Predictions>(), sorted(item, item.scores), item.text);
      });

      it('reads two strings as one pair (with its token types), and batches of pairs', async () => {
        const pairs = gold().classify.filter((item) => item.text_pair !== null);
        const one = (await post('/predict', { inputs: [pairs[0]!.text, pairs[0]!.text_pair] })).json<Predictions>();
        expectPredictions(one, sorted(pairs[0]!, pairs[0]!.scores), 'one pair');
        const many = (await post('/predict', { inputs: pairs.map((p) => [p.text, p.text_pair]) })).json<
          Predictions[]
        >();
        pairs.forEach((pair, i) => expectPredictions(many[i]!, sorted(pair, pair.scores), pair.text));
        // TEI's batch form: a text as a list of one string, beside pairs.
        const text = gold().classify[0]!;
        const mixed = await post('/predict', { inputs: [[text.text], [pairs[0]!.text, pairs[0]!.text_pair]] });
        expect(mixed.statusCode, mixed.body).toBe(200);
        expectPredictions(mixed.json<Predictions[]>()[0]!, sorted(text, text.scores), text.text);
        expectPredictions(mixed.json<Predictions[]>()[1]!, sorted(pairs[0]!, pairs[0]!.scores), 'pair in a batch');
        // The same pair's texts alone score otherwise: the pair is not read as two inputs.
        expect(one.map((p) => p.score)).not.toEqual(sorted(pairs[0]!, gold().classify[0]!.scores).map((p) => p.score));
      });
    });

    describe('/v1/moderations through the openai client', () => {
      let client: OpenAI;
      beforeAll(async () => {
        const address = await server.app.listen({ port: 0, host: '127.0.0.1' });
        client = new OpenAI({ baseURL: `${address}/v1`, apiKey: testKey, maxRetries: 0 });
      });

      it("maps toxic-bert's labels to OpenAI's categories (the rest under their own names) and flags at the manifest's threshold", async () => {
        const items = golden(TOXIC).classify.filter((item) => item.text_pair === null);
        const tolerance = golden(TOXIC).tolerance;
        const response = await client.moderations.create({
          model: 'omni-moderation-latest',
          input: items.map((i) => i.text),
        });
        expect(response.model).toBe(TOXIC);
        expect(response.id).toMatch(/^modr-/);
        expect(response.results).toHaveLength(items.length);
        const labels = golden(TOXIC).labels;
        const score = (item: ClassifyItem, label: string) => item.scores[labels.indexOf(label)]!;
        items.forEach((item, i) => {
          const result = response.results[i]!;
          const scores = result.category_scores as unknown as Record<string, number>;
          const expected: Record<string, number> = {
            harassment: score(item, 'insult'),
            'harassment/threatening': score(item, 'threat'),
            hate: score(item, 'identity_hate'),
            toxic: score(item, 'toxic'),
            severe_toxic: score(item, 'severe_toxic'),
            obscene: score(item, 'obscene'),
          };
          // All 13 of OpenAI's categories, as its clients' types promise, then the labels without one.
          expect(Object.keys(scores).sort(), item.text).toEqual(
            [...moderationCategories, 'toxic', 'severe_toxic', 'obscene'].sort(),
          );
          for (const [key, value] of Object.entries(expected))
            expect(Math.abs(scores[key]! - value), `${item.text}: ${key}`).toBeLessThanOrEqual(tolerance);
          const categories = result.categories as unknown as Record<string, boolean>;
          for (const [key, value] of Object.entries(expected))
            expect(categories[key], `${item.text}: ${key}`).toBe(value >= threshold);
          expect(result.flagged).toBe(Object.values(expected).some((value) => value >= threshold));
          const applied = result.category_applied_input_types as unknown as Record<string, string[]>;
          for (const category of moderationCategories) {
            const judged = Object.hasOwn(expected, category);
            expect(applied[category], category).toEqual(judged ? ['text'] : []);
            // What toxic-bert does not judge is false with score 0.
            if (!judged) expect([categories[category], scores[category]], category).toEqual([false, 0]);
          }
          expect(result.categories.hate).toBe(categories.hate);
          expect(typeof result.categories['self-harm']).toBe('boolean');
        });
        // Some texts are flagged and some not, so both verdicts are checked.
        expect(new Set(response.results.map((r) => r.flagged))).toEqual(new Set([true, false]));
      });

      it("answers OpenAI's CreateModerationResponse (openapi.yaml 2.3.0), for its own example input and the other input shapes", async () => {
        const input = specDocument('openai').components.schemas.CreateModerationRequest!.properties as {
          input: { oneOf: Array<{ example?: string }> };
        };
        const example = input.input.oneOf[0]!.example!;
        for (const body of [
          { input: example },
          { input: [example, 'have a nice day'], model: 'omni-moderation-latest' },
          { input: [{ type: 'text', text: example }] },
        ]) {
          const res = await post('/v1/moderations', body);
          expect(res.statusCode, res.body).toBe(200);
          expectConforms('openai', 'CreateModerationResponse', res.json(), JSON.stringify(body));
        }
        const refused = await post('/v1/moderations', {
          input: [{ type: 'image_url', image_url: { url: 'https://example.com/image.jpg' } }],
        });
        expect(refused.statusCode).toBe(400);
        expectConforms('openai', 'ErrorResponse', refused.json());
      });

      it('takes a single string, and text content parts as one input', async () => {
        const item = golden(TOXIC).classify[2]!;
        const single = await client.moderations.create({ input: item.text });
        const parts = await client.moderations.create({ model: TOXIC, input: [{ type: 'text', text: item.text }] });
        expect(single.results).toHaveLength(1);
        expect(parts.results[0]!.category_scores).toEqual(single.results[0]!.category_scores);
      });

      it('refuses a classifier without a moderation table, a reranker, and image parts, with 400', async () => {
        await expect(client.moderations.create({ model: SST2, input: 'hello' })).rejects.toMatchObject({
          status: 400,
          code: 'invalid_request',
        });
        await expect(client.moderations.create({ model: RERANKER, input: 'hello' })).rejects.toMatchObject({
          status: 400,
        });
        await expect(
          client.moderations.create({
            input: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }],
          }),
        ).rejects.toMatchObject({ status: 400 });
      });
    });

    it.each([
      ['/v1/classify', { input: [] }, 'invalid_request'],
      ['/v1/classify', { input: '' }, 'invalid_request'],
      ['/v1/classify', { input: 5 }, 'invalid_request'],
      ['/v1/classify', { input: ['a', 1] }, 'invalid_request'],
      ['/v1/classify', { input: 'a', model: RERANKER }, 'invalid_request'],
      ['/v1/classify', { input: 'a', model: 'nope/nope' }, 'model_not_found'],
      ['/v1/classify', { input: 'word '.repeat(600), truncate: false }, 'input_too_long'],
      ['/predict', { inputs: [] }, 'invalid_request'],
      ['/predict', { inputs: [['a', 'b', 'c']] }, 'invalid_request'],
      ['/predict', { inputs: ['a', ''] }, 'invalid_request'],
      ['/predict', { inputs: 7 }, 'invalid_request'],
      ['/v1/moderations', { input: [] }, 'invalid_request'],
      ['/v1/moderations', { input: '' }, 'invalid_request'],
      ['/v1/moderations', {}, 'invalid_request'],
    ])('refuses %s %j with a 4xx (%s)', async (url, payload, code) => {
      const res = await post(url, payload);
      expect(res.statusCode, res.body).toBeGreaterThanOrEqual(400);
      expect(res.statusCode, res.body).toBeLessThan(500);
      expect(res.json<{ code?: string }>().code ?? res.json<ErrorBody>().error.code).toBe(code);
    });

    it('still serves after the bad inputs (no worker died)', async () => {
      const res = await post('/v1/classify', { model: SST2, input: 'still here' });
      expect(res.statusCode).toBe(200);
    });

    it('answers /v1/moderations with 501 on a server that serves no moderation classifier', async () => {
      const plain = await startServer({ modelsDir, models: [SST2], workers: 1 });
      try {
        const res = await plain.app.inject({
          method: 'POST',
          url: '/v1/moderations',
          headers: auth,
          payload: { input: 'hello' },
        });
        expect(res.statusCode).toBe(501);
        expect(res.json<ErrorBody>().error).toMatchObject({
          code: 'unsupported_operation',
          message: expect.stringMatching(/moderation classifier/) as unknown,
        });
        const classified = await plain.app.inject({
          method: 'POST',
          url: '/v1/classify',
          headers: auth,
          payload: { input: 'hello' },
        });
        expect(classified.json<ClassifyList>().model).toBe(SST2);
      } finally {
        await plain.close();
      }
    }, 60_000);
  },
);
