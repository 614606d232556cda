/**
 * The GPU path, exact: one server with a stand-in of every model family (scripts/standins/) and the
 * synthetic MiniLM pair on the WebGPU execution provider, against the same golden outputs as on the
 * CPU (an independent float64 numpy forward pass), within 1e-3 (fp32 graphs), and a BERT whose folder has
 * an fp16 graph, which the accelerator runs, within 5e-3. In CI WebGPU runs on
 * Mesa's software Vulkan device (.ci/run installs it): a check of exactness, not of speed. Beside
 * them one model on the CPU through the device map (mixed placement), and a device that is not
 * there: the start refused with what to install, or served on the CPU with the fallback setting.
 */
import { cpSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { installHint } from '../../src/devices.js';
import { probeDevice } from '../../src/engine/devices.js';
import type { Server } from '../../src/main.js';
import { floatVectors, type EmbeddingList, type RerankList } from '../helpers/bodies.js';
import { missing } from '../helpers/resources.js';
import { writeHalfPrecision } from '../helpers/half-precision.js';
import { auth, sharedModelsDir, sharedModelsHint, startServer } from '../helpers/server.js';
import { listeningUrl, spawnTinyServer } from '../helpers/server-process.js';

/** Largest difference between the model's values and the golden ones, at this tolerance. */
const tolerance = 1e-3;
const EMBEDDER = 'synthetic-all-MiniLM-L6-v2';
const RERANKER = 'synthetic-ms-marco-MiniLM-L-6-v2';
/** One stand-in per family and head, each a different code path on the device. */
const FAMILIES = {
  bert: 'BAAI/bge-small-en-v1.5',
  mpnet: 'sentence-transformers/all-mpnet-base-v2',
  xlmr: 'intfloat/multilingual-e5-small',
  nomic: 'nomic-ai/nomic-embed-text-v1.5',
  modernbert: 'Alibaba-NLP/gte-modernbert-base',
  qwen3: 'onnx-community/Qwen3-Embedding-0.6B-ONNX',
  'xlmr dense and token weights': 'aapot/bge-m3-onnx',
  splade: 'prithivida/Splade_PP_en_v1',
  colbert: 'answerdotai/answerai-colbert-small-v1',
  'xlmr reranker': 'BAAI/bge-reranker-base',
  'modernbert reranker': 'Alibaba-NLP/gte-reranker-modernbert-base',
  'bert classifier (sigmoid)': 'Xenova/toxic-bert',
  'distilbert classifier (softmax)': 'Xenova/distilbert-base-uncased-finetuned-sst-2-english',
};
/** Image-text models: both towers on the device, the images decoded and preprocessed in their worker. */
const IMAGE_TEXT = {
  clip: 'Xenova/clip-vit-base-patch32',
  siglip: 'Xenova/siglip-base-patch16-224',
};
/** A BERT with an fp16 graph beside its fp32 one: on an accelerator, the fp16 graph is served. */
const HALF = 'intfloat/e5-small-v2';
const halfTolerance = 5e-3;
/** Served on the CPU beside them, through the device map. */
const ON_CPU = 'sentence-transformers/multi-qa-mpnet-base-dot-v1';

interface Golden {
  embeddings?: Array<{ text: string; prompt_name: string | null; pooled: number[]; normalized: number[] }>;
  normalize?: boolean;
  rerank?: Array<{ query: string; document: string; score: number }>;
  classify?: Array<{ text: string; text_pair: string | null; scores: number[] }>;
  sparse?: Array<{ text: string; indices: number[]; values: number[] }>;
  texts?: Array<{ text: string; normalized: number[] }>;
  images?: Array<{ file: string; normalized: number[] }>;
  queries?: Array<{ text: string; vectors: number[][] }>;
  scores?: Array<{ query: string; document: string; score: number }>;
  items?: Array<{ text?: string; normalized?: number[]; query?: string; document?: string; score?: number }>;
}

const standins = inject('standinsDir');
const shared = sharedModelsDir();
const webgpu = await probeDevice('webgpu');
/** CUDA where it is not installed (as in CI); on a machine with CUDA, a provider this build of ONNX Runtime lacks. */
let absent = 'cuda';
for (const device of ['cuda', 'dml', 'coreml']) {
  if ((await probeDevice(device)) !== undefined) {
    absent = device;
    break;
  }
}

function worst(actual: ArrayLike<number>, expected: number[]): number {
  expect(actual.length).toBe(expected.length);
  let difference = 0;
  for (let i = 0; i < expected.length; i++) difference = Math.max(difference, Math.abs(actual[i]! - expected[i]!));
  return difference;
}

/** Largest difference between two sparse vectors, an index missing on one side counting as 0. */
function sparseWorst(
  actual: { indices: number[]; values: number[] },
  expected: { indices: number[]; values: number[] },
): number {
  const a = new Map(actual.indices.map((index, i) => [index, actual.values[i]!]));
  const b = new Map(expected.indices.map((index, i) => [index, expected.values[i]!]));
  let difference = 0;
  for (const index of new Set([...a.keys(), ...b.keys()]))
    difference = Math.max(difference, Math.abs((a.get(index) ?? 0) - (b.get(index) ?? 0)));
  return difference;
}

const webgpuHint = `no WebGPU adapter here (${webgpu}): on Debian, install Mesa's Vulkan drivers from bookworm-backports as .ci/run does`;
const present = standins !== '' && shared !== undefined && webgpu === undefined;
const hint =
  webgpu !== undefined
    ? webgpuHint
    : shared === undefined
      ? sharedModelsHint
      : `the stand-ins could not be generated: ${inject('standinsMissing')}`;

describe.skipIf(missing(present, hint))(
  'every family on WebGPU against its golden outputs, one model on the CPU beside them',
  () => {
    let server: Server;
    const goldens = new Map<string, Golden>();
    const post = async <T>(url: string, payload: object) => {
      const res = await server.app.inject({ method: 'POST', url, headers: auth, payload });
      expect(res.statusCode, res.body).toBe(200);
      return res.json<T>();
    };

    beforeAll(async () => {
      // One models dir with the stand-ins and the synthetic pair, linked in place.
      const modelsDir = mkdtempSync(join(tmpdir(), 'onnx-gateway-webgpu-'));
      for (const repo of [...Object.values(FAMILIES), ...Object.values(IMAGE_TEXT), ON_CPU]) {
        mkdirSync(join(modelsDir, dirname(repo)), { recursive: true });
        symlinkSync(join(standins, repo), join(modelsDir, repo));
        goldens.set(repo, JSON.parse(readFileSync(join(standins, repo, 'golden.json'), 'utf8')) as Golden);
      }
      // A copy of the stand-in with an fp16 graph made from its fp32 one, as exporters make theirs.
      cpSync(join(standins, HALF), join(modelsDir, HALF), { recursive: true });
      writeHalfPrecision(join(standins, HALF, 'onnx/model.onnx'), join(modelsDir, HALF, 'onnx/model_fp16.onnx'));
      goldens.set(HALF, JSON.parse(readFileSync(join(standins, HALF, 'golden.json'), 'utf8')) as Golden);
      for (const model of [EMBEDDER, RERANKER]) {
        symlinkSync(join(shared!, model), join(modelsDir, model));
        goldens.set(model, JSON.parse(readFileSync(join(shared!, model, 'golden.json'), 'utf8')) as Golden);
      }
      server = await startServer({
        modelsDir,
        models: [EMBEDDER, RERANKER, ...Object.values(FAMILIES), ...Object.values(IMAGE_TEXT), HALF, ON_CPU],
        device: 'webgpu',
        deviceMap: [`${ON_CPU}=cpu`],
        teiModels: [FAMILIES.colbert],
        workers: 1,
        // One window per rerank pair, as the goldens cut pairs by longest_first.
        rerankMaxChunks: 1,
      });
    }, 600_000);
    afterAll(async () => {
      await server?.close();
    });

    it('places every model on webgpu as one session, the mapped one on the CPU, and serves the fp16 graph where there is one', async () => {
      type Listed = { id: string; variant: string; placement: { device: string; sessions: number } };
      const listed = (await server.app.inject({ method: 'GET', url: '/v1/models', headers: auth })).json<{
        data: Listed[];
      }>().data;
      const devices = Object.fromEntries(listed.map((model) => [model.id, model.placement.device]));
      expect(devices).toEqual(
        Object.fromEntries(
          [EMBEDDER, RERANKER, ...Object.values(FAMILIES), ...Object.values(IMAGE_TEXT), HALF, ON_CPU].map((id) => [
            id,
            id === ON_CPU ? 'cpu' : 'webgpu',
          ]),
        ),
      );
      for (const model of listed.filter((m) => m.id !== ON_CPU)) expect(model.placement.sessions, model.id).toBe(1);
      expect(listed.filter((model) => model.variant === 'fp16').map((model) => model.id)).toEqual([HALF]);
      expect(server.registry.resolve(HALF, 'embedding').onnxPath).toMatch(/onnx\/model_fp16\.onnx$/);
    });

    it(`matches the golden vectors with the fp16 graph of ${HALF} (bert), as float32, within ${halfTolerance}`, async () => {
      const golden = goldens.get(HALF)!;
      for (const prompt of new Set(golden.embeddings!.map((item) => item.prompt_name))) {
        const group = golden.embeddings!.filter((item) => item.prompt_name === prompt);
        const body = await post<EmbeddingList>('/v1/embeddings', {
          model: HALF,
          input: group.map((item) => item.text),
          ...(prompt ? { input_type: prompt } : {}),
        });
        group.forEach((item, i) =>
          expect(worst(floatVectors(body)[i]!, item.normalized), item.text).toBeLessThanOrEqual(halfTolerance),
        );
      }
      // Not the fp32 graph's answer: half precision shows.
      const [first] = golden.embeddings!;
      const body = await post<EmbeddingList>('/v1/embeddings', {
        model: HALF,
        input: first!.text,
        ...(first!.prompt_name ? { input_type: first!.prompt_name } : {}),
      });
      expect(worst(floatVectors(body)[0]!, first!.normalized)).toBeGreaterThan(1e-5);
    });

    it(`matches the synthetic MiniLM pair's golden vectors and scores (${EMBEDDER}, ${RERANKER})`, async () => {
      const items = goldens.get(EMBEDDER)!.items!;
      const batched = await post<EmbeddingList>('/v1/embeddings', {
        model: EMBEDDER,
        input: items.map((item) => item.text),
      });
      items.forEach((item, i) =>
        expect(worst(floatVectors(batched)[i]!, item.normalized!), item.text).toBeLessThanOrEqual(tolerance),
      );
      for (const item of items.slice(0, 3)) {
        const alone = await post<EmbeddingList>('/v1/embeddings', { model: EMBEDDER, input: item.text });
        expect(worst(floatVectors(alone)[0]!, item.normalized!), item.text).toBeLessThanOrEqual(tolerance);
      }
      for (const pair of goldens.get(RERANKER)!.items!) {
        const body = await post<RerankList>('/v1/rerank', {
          model: RERANKER,
          query: pair.query,
          documents: [pair.document],
        });
        expect(Math.abs(body.results[0]!.relevance_score - pair.score!), pair.query).toBeLessThanOrEqual(tolerance);
      }
    });

    const embedders = Object.entries(FAMILIES).filter(([family]) =>
      ['bert', 'mpnet', 'xlmr', 'nomic', 'modernbert', 'qwen3', 'xlmr dense and token weights'].includes(family),
    );
    for (const [family, repo] of [...embedders, ['mpnet, on the CPU', ON_CPU] as const]) {
      it(`matches the golden vectors of ${repo} (${family}), each prompt's texts batched, then one alone`, async () => {
        const golden = goldens.get(repo)!;
        const items = golden.embeddings!;
        const expected = (item: (typeof items)[number]) => (golden.normalize ? item.normalized : item.pooled);
        for (const prompt of new Set(items.map((item) => item.prompt_name))) {
          const group = items.filter((item) => item.prompt_name === prompt);
          const body = await post<EmbeddingList>('/v1/embeddings', {
            model: repo,
            input: group.map((item) => item.text),
            ...(prompt ? { input_type: prompt } : {}),
          });
          group.forEach((item, i) =>
            expect(worst(floatVectors(body)[i]!, expected(item)), item.text).toBeLessThanOrEqual(tolerance),
          );
        }
        const [first] = items;
        const alone = await post<EmbeddingList>('/v1/embeddings', {
          model: repo,
          input: first!.text,
          ...(first!.prompt_name ? { input_type: first!.prompt_name } : {}),
        });
        expect(worst(floatVectors(alone)[0]!, expected(first!)), first!.text).toBeLessThanOrEqual(tolerance);
      });
    }

    for (const [family, repo] of Object.entries(IMAGE_TEXT)) {
      it(`matches the golden text and image vectors of ${repo} (${family}), both towers on the device`, async () => {
        const golden = goldens.get(repo)!;
        const texts = await post<EmbeddingList>('/v1/embeddings', {
          model: repo,
          input: golden.texts!.map((item) => item.text),
        });
        golden.texts!.forEach((item, i) =>
          expect(worst(floatVectors(texts)[i]!, item.normalized), item.text).toBeLessThanOrEqual(tolerance),
        );
        const mime: Record<string, string> = { jpg: 'image/jpeg', png: 'image/png', webp: 'image/webp' };
        const images = await post<EmbeddingList>('/v1/embeddings', {
          model: repo,
          input: golden.images!.map((item) => ({
            type: 'image_url',
            image_url: {
              url: `data:${mime[item.file.split('.').pop()!]};base64,${readFileSync(join(standins, repo, item.file)).toString('base64')}`,
            },
          })),
        });
        golden.images!.forEach((item, i) =>
          expect(worst(floatVectors(images)[i]!, item.normalized), item.file).toBeLessThanOrEqual(tolerance),
        );
        type Listed = { id: string; placement: { device: string }; vision?: { placement?: { device: string } } };
        const listed = (await server.app.inject({ method: 'GET', url: '/v1/models', headers: auth })).json<{
          data: Listed[];
        }>().data;
        const model = listed.find((m) => m.id === repo)!;
        expect([model.placement.device, model.vision?.placement?.device]).toEqual(['webgpu', 'webgpu']);
      });
    }

    it('serves the models on the device at the same time: requests to all of them at once, each its golden answer', async () => {
      const embedders = [
        EMBEDDER,
        ...Object.values(FAMILIES).filter((repo) => goldens.get(repo)!.embeddings && !goldens.get(repo)!.sparse),
      ];
      const rounds = await Promise.all(
        [...embedders, ...embedders].map(async (repo) => {
          const golden = goldens.get(repo)!;
          const item = golden.embeddings?.find((i) => i.prompt_name === null) ?? golden.items![0]!;
          const body = await post<EmbeddingList>('/v1/embeddings', { model: repo, input: [item.text, item.text] });
          const expected = 'pooled' in item && !golden.normalize ? item.pooled : item.normalized!;
          return {
            repo,
            worst: Math.max(worst(floatVectors(body)[0]!, expected), worst(floatVectors(body)[1]!, expected)),
          };
        }),
      );
      for (const { repo, worst: difference } of rounds) expect(difference, repo).toBeLessThanOrEqual(tolerance);
    });

    it('tells where batches ran: /metrics by device, TEI /info and Ollama /api/ps', async () => {
      const metrics = (await server.app.inject({ method: 'GET', url: '/metrics' })).body;
      const batches = (device: string) =>
        Number(
          new RegExp(`^onnx_gateway_device_batches_total\\{device="${device}"\\} (\\d+)`, 'm').exec(metrics)?.[1] ?? 0,
        );
      expect(batches('webgpu')).toBeGreaterThan(0);
      expect(
        (await server.app.inject({ method: 'GET', url: '/info', headers: auth })).json<{ device: string }>().device,
      ).toBe('webgpu');
      const ps = (await server.app.inject({ method: 'GET', url: '/api/ps', headers: auth })).json<{
        models: { name: string; size: number; size_vram: number }[];
      }>().models;
      const onGpu = ps.find((model) => model.name === `${EMBEDDER}:latest`)!;
      expect(onGpu.size_vram).toBe(onGpu.size);
      expect(ps.find((model) => model.name === `${ON_CPU}:latest`)?.size_vram ?? 0).toBe(0);
    });

    for (const repo of [FAMILIES.splade, FAMILIES['xlmr dense and token weights']]) {
      it(`matches the golden sparse vectors of ${repo}`, async () => {
        const items = goldens.get(repo)!.sparse!;
        const body = await post<EmbeddingList>('/v1/embeddings', {
          model: repo,
          input: items.map((item) => item.text),
          encoding_format: 'sparse',
        });
        items.forEach((item, i) =>
          expect(
            sparseWorst(body.data[i]!.embedding as { indices: number[]; values: number[] }, item),
            item.text,
          ).toBeLessThanOrEqual(tolerance),
        );
      });
    }

    it(`matches the golden token vectors and MaxSim scores of ${FAMILIES.colbert} (colbert)`, async () => {
      const golden = goldens.get(FAMILIES.colbert)!;
      const vectors = await post<number[][][]>('/embed_all', {
        inputs: golden.queries!.map((query) => query.text),
        prompt_name: 'query',
      });
      golden.queries!.forEach((query, i) =>
        expect(worst(vectors[i]!.flat(), query.vectors.flat()), query.text).toBeLessThanOrEqual(tolerance),
      );
      for (const query of new Set(golden.scores!.map((score) => score.query))) {
        const pairs = golden.scores!.filter((score) => score.query === query);
        const body = await post<RerankList>('/v1/rerank', {
          model: FAMILIES.colbert,
          query,
          documents: pairs.map((pair) => pair.document),
        });
        for (const result of body.results)
          expect(Math.abs(result.relevance_score - pairs[result.index]!.score), query).toBeLessThanOrEqual(tolerance);
      }
    });

    for (const repo of [FAMILIES['xlmr reranker'], FAMILIES['modernbert reranker']]) {
      it(`matches the golden scores of ${repo}, each query's documents ranked together`, async () => {
        const pairs = goldens.get(repo)!.rerank!;
        for (const query of new Set(pairs.map((pair) => pair.query))) {
          const group = pairs.filter((pair) => pair.query === query);
          const body = await post<RerankList>('/v1/rerank', {
            model: repo,
            query,
            documents: group.map((pair) => pair.document),
          });
          for (const result of body.results)
            expect(Math.abs(result.relevance_score - group[result.index]!.score), query).toBeLessThanOrEqual(tolerance);
        }
      });
    }

    for (const repo of [FAMILIES['bert classifier (sigmoid)'], FAMILIES['distilbert classifier (softmax)']]) {
      it(`matches the golden label scores of ${repo}, all texts batched`, async () => {
        const items = goldens.get(repo)!.classify!.filter((item) => item.text_pair === null);
        const body = await post<{ data: { probs: number[] }[] }>('/v1/classify', {
          model: repo,
          input: items.map((item) => item.text),
        });
        items.forEach((item, i) =>
          expect(worst(body.data[i]!.probs, item.scores), item.text).toBeLessThanOrEqual(tolerance),
        );
      });
    }
  },
);

describe(`a device this machine does not have (${absent})`, () => {
  it('stops the start with the device, the reason ONNX Runtime gave, what to install and the fallback setting', async () => {
    const start = startServer({ device: absent, workers: 1 });
    await expect(start).rejects.toMatchObject({ code: 'device_unavailable' });
    const message = await startServer({ device: absent, workers: 1 }).catch((error: Error) => error.message);
    expect(message).toContain(
      `Device "${absent}" (for tiny-embedder, tiny-reranker) can not be used: ONNX Runtime says "`,
    );
    expect(message).toContain(installHint(absent));
    expect(message).toMatch(/Or set ONNX_GATEWAY_DEVICE_FALLBACK=cpu to serve these models on the CPU\.$/);
  });

  it('serves on the CPU with the fallback setting: one warning in the log, cpu in every placement', async () => {
    const server = spawnTinyServer(mkdtempSync(join(tmpdir(), 'onnx-gateway-fallback-')), {
      ONNX_GATEWAY_DEVICE: absent,
      ONNX_GATEWAY_DEVICE_FALLBACK: 'cpu',
    });
    try {
      const url = await listeningUrl(server);
      const warnings = server.lines.filter((line) => line.level === 40 && line.msg.startsWith(`Device "${absent}"`));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]!.msg).toMatch(
        /Serving tiny-embedder, tiny-reranker on cpu instead \(ONNX_GATEWAY_DEVICE_FALLBACK=cpu\)\.$/,
      );
      const listed = (await (await fetch(`${url}/v1/models`)).json()) as {
        data: Array<{ placement: { device: string } }>;
      };
      expect(listed.data.map((model) => model.placement.device)).toEqual(['cpu', 'cpu']);
      const embedded = await fetch(`${url}/v1/embeddings`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ input: 'hello' }),
      });
      expect(embedded.status).toBe(200);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }
  });
});
