/**
 * Image-text models served exactly: each exact-interface stand-in (CLIP, SigLIP, jina-clip as
 * their Hub exports are: the real graphs' inputs and outputs, tokenizer and image processor
 * configs, small random weights), pulled by repo id from a stand-in Hub, embeds the golden texts
 * and images (decoded and preprocessed in the workers) to within the golden's tolerance of an
 * independent numpy forward pass: one at a time, all batched together, texts and images mixed in
 * one request. Also: usage, a corrupt image failing only its own request among concurrent ones,
 * both towers placed, and the cache answering a repeated image.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { EmbeddingCache } from '../../src/core/cache/embedding-cache.js';
import type { CoreContext } from '../../src/core/context.js';
import { embed, type EmbeddingItem } from '../../src/core/embeddings.js';
import { ApiError } from '../../src/errors.js';
import { parseServerTiming } from '../../src/http/timing.js';
import type { Server } from '../../src/main.js';
import { Catalogue } from '../../src/models/catalogue.js';
import { pullModel, pullTarget } from '../../src/models/download.js';
import { Hub } from '../../src/models/hub.js';
import { readLock } from '../../src/models/lock.js';
import { repoFromFolder, startStandInHub, type StandInHub } from '../fixtures/stand-in-hub.js';
import { missing } from '../helpers/resources.js';
import { auth, startServer } from '../helpers/server.js';
import { listMultimodalStandins, standinCommit } from '../helpers/standins.js';

interface Golden {
  repo: string;
  family: string;
  task: string;
  tolerance: number;
  vision_tokens: number;
  graphs: Record<string, string>;
  texts: { text: string; prompt_name?: string | null; input_ids: number[]; raw: number[]; normalized: number[] }[];
  images: { file: string; raw: number[]; normalized: number[] }[];
  /** Matryoshka widths: every text's, then every image's vector cut to the width and normalised. */
  matryoshka?: Record<string, number[][]>;
}

const dir = inject('standinsDir');
const standinsMissing = inject('standinsMissing');
const readGolden = (repo: string): Golden => JSON.parse(readFileSync(join(dir, repo, 'golden.json'), 'utf8')) as Golden;
const repos = dir ? listMultimodalStandins(dir) : [];
/** A text model served beside them, for the refusals. */
const textModel = 'BAAI/bge-small-en-v1.5';

function maxDifference(actual: ArrayLike<number>, expected: number[]): number {
  expect(actual.length).toBe(expected.length);
  let worst = 0;
  for (let i = 0; i < expected.length; i++) worst = Math.max(worst, Math.abs(actual[i]! - expected[i]!));
  return worst;
}

/** A PNG whose header reads well (so that it is queued) and whose image data is noise. */
function corruptPng(): Uint8Array {
  const good = readFileSync(join(dir, repos[0]!, 'golden-images', 'gray-200x150.png'));
  const bytes = new Uint8Array(good);
  for (let i = 60; i < bytes.length - 12; i++) bytes[i] = (i * 7919) & 0xff;
  return bytes;
}

describe.skipIf(missing(dir !== '' && repos.length > 0, `the image-text stand-ins are not there: ${standinsMissing}`))(
  'image-text models against golden outputs',
  () => {
    const catalogue = Catalogue.load();
    const commitOf = (repo: string) => standinCommit(catalogue, repo);
    let hub: StandInHub;
    let modelsDir: string;
    let server: Server;
    let core: CoreContext;
    /** Max abs differences per repo, for the record. */
    const worst: Record<string, number> = {};
    const image = (repo: string, file: string) => new Uint8Array(readFileSync(join(dir, repo, file)));

    beforeAll(async () => {
      hub = await startStandInHub(
        await Promise.all([...repos, textModel].map((repo) => repoFromFolder(join(dir, repo), repo, commitOf(repo)))),
      );
      modelsDir = mkdtempSync(join(tmpdir(), 'onnx-gateway-multimodal-'));
      for (const repo of [...repos, textModel])
        await pullModel(pullTarget(repo, catalogue, modelsDir)!, {
          modelsDir,
          hub: new Hub({ endpoint: hub.url }),
          retries: 0,
        });
      server = await startServer({ modelsDir, models: [...repos, textModel], workers: 1 });
      core = {
        registry: server.registry,
        scheduler: server.engine.scheduler,
        limits: {
          maxInputs: 2048,
          maxInputChars: 100_000,
          truncate: true,
          rerankMaxChunks: 1,
          rerankChunkOverlap: 0,
          embeddingImageMaxBytes: 20 * 2 ** 20,
          imageMaxPixels: 4096 * 4096,
        },
        lifecycle: server.engine,
        embeddingCache: new EmbeddingCache(64 * 2 ** 20),
      };
    }, 300_000);
    afterAll(async () => {
      await server?.close();
      await hub?.close();
      // The numbers the report quotes.
      console.log('multimodal stand-ins, max abs difference from the golden:', JSON.stringify(worst));
    });

    it('pulled both towers and the image processor config, locked', () => {
      for (const repo of repos) {
        const [owner, name] = repo.split('/') as [string, string];
        const lock = readLock(join(modelsDir, owner, name))!;
        const files = lock.files.map((f) => f.path);
        expect(files, repo).toContain('preprocessor_config.json');
        for (const graph of Object.values(readGolden(repo).graphs)) expect(files, repo).toContain(graph);
        expect(
          files.some((f) => f.startsWith('golden')),
          repo,
        ).toBe(false);
      }
    });

    it.each(repos)('%s: texts and images one at a time, raw and normalised', async (repo) => {
      const golden = readGolden(repo);
      let difference = 0;
      for (const item of golden.texts) {
        for (const normalize of [true, false]) {
          const result = await embed(core, {
            model: repo,
            input: [item.text],
            normalize,
            inputType: item.prompt_name ?? undefined,
          });
          difference = Math.max(difference, maxDifference(result.vectors, normalize ? item.normalized : item.raw));
          expect(result.promptTokens).toBe(item.input_ids.length);
        }
      }
      for (const item of golden.images) {
        for (const normalize of [true, false]) {
          const result = await embed(core, { model: repo, input: [{ image: image(repo, item.file) }], normalize });
          difference = Math.max(difference, maxDifference(result.vectors, normalize ? item.normalized : item.raw));
          expect(result.promptTokens).toBe(golden.vision_tokens);
        }
      }
      worst[repo] = Math.max(worst[repo] ?? 0, difference);
      expect(difference).toBeLessThanOrEqual(golden.tolerance);
    });

    it.each(repos)('%s: texts and images mixed in one request, batched, in input order', async (repo) => {
      const golden = readGolden(repo);
      // Interleaved: image, text, image, text, ...
      const items: EmbeddingItem[] = [];
      const expected: number[][] = [];
      const longest = Math.max(golden.texts.length, golden.images.length);
      for (let i = 0; i < longest; i++) {
        const picture = golden.images[i];
        if (picture) {
          items.push({ image: image(repo, picture.file) });
          expected.push(picture.normalized);
        }
        // One request has one prompt: the texts embedded without one.
        const text = golden.texts.filter((item) => !item.prompt_name)[i];
        if (text) {
          items.push(text.text);
          expected.push(text.normalized);
        }
      }
      const result = await embed(core, { model: repo, input: items });
      expect(result.count).toBe(items.length);
      const width = result.dimensions;
      let difference = 0;
      expected.forEach((row, i) => {
        difference = Math.max(difference, maxDifference(result.vectors.subarray(i * width, (i + 1) * width), row));
      });
      worst[repo] = Math.max(worst[repo] ?? 0, difference);
      expect(difference).toBeLessThanOrEqual(golden.tolerance);
      const textTokens = golden.texts
        .filter((text) => !text.prompt_name)
        .reduce((sum, text) => sum + text.input_ids.length, 0);
      expect(result.promptTokens).toBe(textTokens + golden.images.length * golden.vision_tokens);
    });

    it.each(repos.filter((repo) => readGolden(repo).matryoshka))(
      '%s: Matryoshka dimensions for texts and images',
      async (repo) => {
        const golden = readGolden(repo);
        let difference = 0;
        for (const [width, rows] of Object.entries(golden.matryoshka!)) {
          const dimensions = Number(width);
          const vectors: Float32Array[] = [];
          for (const item of golden.texts) {
            const input = [item.text];
            const result = await embed(core, {
              model: repo,
              input,
              dimensions,
              inputType: item.prompt_name ?? undefined,
            });
            vectors.push(result.vectors);
          }
          const images = await embed(core, {
            model: repo,
            input: golden.images.map((item) => ({ image: image(repo, item.file) })),
            dimensions,
          });
          golden.images.forEach((_, i) => vectors.push(images.vectors.subarray(i * dimensions, (i + 1) * dimensions)));
          rows.forEach((row, i) => (difference = Math.max(difference, maxDifference(vectors[i]!, row))));
        }
        worst[repo] = Math.max(worst[repo] ?? 0, difference);
        expect(difference).toBeLessThanOrEqual(golden.tolerance);
      },
    );

    it('fails only the request of a corrupt image among concurrent requests', async () => {
      const repo = repos[0]!;
      const golden = readGolden(repo);
      const good = golden.images.slice(0, 3);
      const requests = [
        ...good.map((item) => embed(core, { model: repo, input: [{ image: image(repo, item.file) }] })),
        embed(core, { model: repo, input: [{ image: image(repo, good[0]!.file) }, { image: corruptPng() }] }),
        ...good.map((item) => embed(core, { model: repo, input: [{ image: image(repo, item.file) }] })),
      ];
      const settled = await Promise.allSettled(requests);
      const failure = settled[good.length]!;
      expect(failure.status).toBe('rejected');
      const error = (failure as PromiseRejectedResult).reason as ApiError;
      expect(error).toBeInstanceOf(ApiError);
      expect(error.code).toBe('invalid_image');
      expect(error.status).toBe(400);
      expect(error.param).toBe('input[1]');
      settled.forEach((outcome, i) => {
        if (i === good.length) return;
        expect(outcome.status).toBe('fulfilled');
        const item = i < good.length ? good[i]! : good[i - good.length - 1]!;
        const vectors = (outcome as PromiseFulfilledResult<{ vectors: Float32Array }>).value.vectors;
        expect(maxDifference(vectors, item.normalized)).toBeLessThanOrEqual(golden.tolerance);
      });
      // The worker lives on: the same tower answers the next image.
      const after = await embed(core, { model: repo, input: [{ image: image(repo, good[1]!.file) }] });
      expect(maxDifference(after.vectors, good[1]!.normalized)).toBeLessThanOrEqual(golden.tolerance);
      expect(server.engine.restarts).toBe(0);
    });

    it('answers a repeated image from the cache, keyed by its bytes', async () => {
      const repo = repos[0]!;
      const golden = readGolden(repo);
      const file = golden.images[golden.images.length - 1]!.file;
      await embed(core, { model: repo, input: [{ image: image(repo, file) }] });
      const again = await embed(core, { model: repo, input: [{ image: image(repo, file) }, 'a text never sent'] });
      expect(again.cacheHits).toBe(1);
      expect(
        maxDifference(again.vectors.subarray(0, again.dimensions), golden.images.at(-1)!.normalized),
      ).toBeLessThanOrEqual(golden.tolerance);
    });

    it('refuses images to a text model, fused items, and bad image bytes before queueing them (400)', async () => {
      const repo = repos[0]!;
      const picture = image(repo, readGolden(repo).images[0]!.file);
      await expect(embed(core, { model: textModel, input: ['a text', { image: picture }] })).rejects.toMatchObject({
        code: 'invalid_request',
        param: 'input[1]',
        message: expect.stringContaining(`"${textModel}" embeds texts only`) as string,
      });
      await expect(
        embed(core, { model: repo, input: [{ parts: ['a cat', { image: picture }] }] }),
      ).rejects.toMatchObject({
        code: 'invalid_request',
        message: expect.stringContaining('can not embed text and images as one vector') as string,
      });
      await expect(
        embed(core, { model: repo, input: [{ image: new TextEncoder().encode('no image at all') }] }),
      ).rejects.toMatchObject({ code: 'invalid_image', param: 'input[0]' });
    });

    it.each(repos)('%s: POST /v1/embeddings with images as data URIs beside texts, in input order', async (repo) => {
      const golden = readGolden(repo);
      const dataUri = (file: string) =>
        `data:image/${file.endsWith('.png') ? 'png' : file.endsWith('.webp') ? 'webp' : 'jpeg'};base64,${Buffer.from(image(repo, file)).toString('base64')}`;
      const [first, second] = golden.images as [Golden['images'][number], Golden['images'][number]];
      const text = golden.texts[0]!;
      const res = await server.app.inject({
        method: 'POST',
        url: '/v1/embeddings',
        headers: auth,
        payload: {
          model: repo,
          input: [
            { type: 'image_url', image_url: { url: dataUri(first.file) } },
            text.text,
            { type: 'image_url', image_url: { url: dataUri(second.file) } },
          ],
        },
      });
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json<{ data: { index: number; embedding: number[] }[]; usage: { prompt_tokens: number } }>();
      const expected = [first.normalized, text.normalized, second.normalized];
      let difference = 0;
      body.data.forEach((row, i) => {
        expect(row.index).toBe(i);
        difference = Math.max(difference, maxDifference(row.embedding, expected[i]!));
      });
      worst[repo] = Math.max(worst[repo] ?? 0, difference);
      expect(difference).toBeLessThanOrEqual(golden.tolerance);
      expect(body.usage.prompt_tokens).toBe(text.input_ids.length + 2 * golden.vision_tokens);
      // Where its time went: the main thread's part (body, base64, headers), the queue, and the
      // workers' decoding and preprocessing (these images were not sent over HTTP before) and inference.
      const phases = parseServerTiming(res.headers['server-timing'] as string);
      for (const phase of ['parse', 'base64', 'header', 'queue', 'preprocess', 'inference'] as const)
        expect(phases[phase], `${phase} in ${String(res.headers['server-timing'])}`).toBeGreaterThanOrEqual(0);
      expect(phases.preprocess).toBeGreaterThan(0);
      expect(phases.base64).toBeGreaterThan(0);
    });

    it('places both towers in the memory budget and lists them', async () => {
      const res = await server.app.inject({ method: 'GET', url: '/v1/models', headers: auth });
      const models = res.json<{
        data: {
          id: string;
          status?: string;
          placement?: { device: string; sessions: number };
          vision?: { image_tokens: number; status: string; placement?: { device: string; sessions: number } };
        }[];
      }>().data;
      for (const repo of repos) {
        const model = models.find((m) => m.id === repo)!;
        expect(model, repo).toMatchObject({ status: 'loaded', placement: { device: 'cpu' } });
        expect(model.vision, repo).toMatchObject({
          image_tokens: readGolden(repo).vision_tokens,
          status: 'loaded',
          placement: { device: 'cpu' },
        });
        expect(model.vision!.placement!.sessions).toBeGreaterThanOrEqual(1);
      }
      expect(models.find((m) => m.id === textModel)!.vision).toBeUndefined();
    });
  },
);
