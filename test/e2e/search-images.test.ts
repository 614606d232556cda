/**
 * Images in web search, with an image-text model's stand-in (CLIP, pulled by repo id) as the
 * search image model: image documents added over the API (data URIs) and with `index add
 * --images`, ranked against a query by the model's own text-to-image similarity (checked against
 * the vectors /v1/embeddings gives for the query and each image), kept out of the text results;
 * and SearXNG's image results reordered by what their thumbnails show, fetched from a host on
 * loopback (the reader's policy opened for the test), an unfetchable one kept last.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Server } from '../../src/main.js';
import { Catalogue } from '../../src/models/catalogue.js';
import { pullModel, pullTarget } from '../../src/models/download.js';
import { Hub } from '../../src/models/hub.js';
import { cosine } from '../../src/vectors/scores.js';
import { repoFromFolder, startStandInHub, type StandInHub } from '../fixtures/stand-in-hub.js';
import { imageResult, startStandInSearxng, type StandInSearxng } from '../fixtures/stand-in-searxng.js';
import type { EmbeddingList, SearchTask } from '../helpers/bodies.js';
import { missing } from '../helpers/resources.js';
import { standinCommit } from '../helpers/standins.js';
import { auth, startServer, testKey } from '../helpers/server.js';

const run = promisify(execFile);
const dir = inject('standinsDir');
const standinsMissing = inject('standinsMissing');
const clip = 'Xenova/clip-vit-base-patch32';
const textModel = 'BAAI/bge-small-en-v1.5';
const pictures = ['photo-640x480.jpg', 'portrait-300x500.png', 'gray-200x150.png', 'exif-orientation-6.jpg'];
const query = 'a photo of a cat on a sofa';
/** The test key may write to the index. */
const writer = { indexWriteKeys: [testKey] };

const picture = (file: string) => readFileSync(join(dir, clip, 'golden-images', file));
const dataUri = (file: string) =>
  `data:image/${file.endsWith('.png') ? 'png' : 'jpeg'};base64,${picture(file).toString('base64')}`;

describe.skipIf(missing(dir !== '', `the stand-ins are not there: ${standinsMissing}`))('images in web search', () => {
  const catalogue = Catalogue.load();
  let hub: StandInHub;
  let modelsDir: string;
  let server: Server;
  /** The model's vector of the query and of each picture, as /v1/embeddings gives them. */
  let queryVector: number[];
  const imageVectors = new Map<string, number[]>();

  const post = async (url: string, payload: object, on = server) =>
    on.app.inject({ method: 'POST', url, payload, headers: auth });
  async function search(body: object, on = server): Promise<SearchTask> {
    const created = await post('/v1/web-search/search', body, on);
    expect(created.statusCode, created.body).toBe(200);
    const url = `/v1/web-search/search/${created.json<{ id: string }>().id}?wait=30`;
    return (await on.app.inject({ method: 'GET', url, headers: auth })).json<SearchTask>();
  }
  /** Cosine similarity of the query and a picture under the model. */
  const similarity = (file: string) => cosine(queryVector, imageVectors.get(file)!);

  beforeAll(async () => {
    hub = await startStandInHub(
      await Promise.all(
        [clip, textModel].map((repo) => repoFromFolder(join(dir, repo), repo, standinCommit(catalogue, repo))),
      ),
    );
    modelsDir = mkdtempSync(join(tmpdir(), 'onnx-gateway-search-images-'));
    for (const repo of [clip, textModel])
      await pullModel(pullTarget(repo, catalogue, modelsDir)!, {
        modelsDir,
        hub: new Hub({ endpoint: hub.url }),
        retries: 0,
      });
    // The search image model is served without being named in models.
    server = await startServer({ ...writer, modelsDir, models: [textModel], searchImageModel: clip, workers: 1 });
    const embedded = await post('/v1/embeddings', { model: clip, input: [query], input_type: 'query' });
    queryVector = embedded.json<EmbeddingList>().data[0]!.embedding as number[];
    const images = await post('/v1/embeddings', {
      model: clip,
      input: pictures.map((file) => ({ type: 'image_url', image_url: { url: dataUri(file) } })),
    });
    expect(images.statusCode, images.body).toBe(200);
    images.json<EmbeddingList>().data.forEach((row, i) => imageVectors.set(pictures[i]!, row.embedding as number[]));
  }, 300_000);
  afterAll(async () => {
    await server?.close();
    await hub?.close();
  });

  it('indexes images given as data URIs and ranks them by what they show', async () => {
    const added = await post('/v1/web-search/index/documents', {
      documents: [
        { text: 'Cats sleep on sofas for most of the day.', title: 'Cats' },
        ...pictures.map((file, i) => ({
          image: dataUri(file),
          title: file,
          alt: `picture ${i}`,
          ...(i === 0 ? { url: 'https://example.com/photo.jpg', page_url: 'https://example.com/gallery' } : {}),
        })),
      ],
    });
    expect(added.statusCode, added.body).toBe(200);
    const report = added.json<{ added: number; embedded: number; ids: string[] }>();
    expect(report).toMatchObject({ added: 5, embedded: 5 });
    expect(report.ids[1]).toBe('https://example.com/photo.jpg');
    for (const id of report.ids.slice(2)) expect(id).toMatch(/^sha256:[0-9a-f]{64}$/);

    const stats = (await server.app.inject({ method: 'GET', url: '/v1/web-search/index', headers: auth })).json<{
      documents: number;
      images: { documents: number; vectors: Record<string, number> };
      image_model: string;
    }>();
    expect(stats).toMatchObject({ documents: 1, images: { documents: 4, vectors: { [clip]: 4 } }, image_model: clip });

    const task = await search({ query, includeImages: true });
    expect(task.state).toBe('succeeded');
    // Image documents are not text results.
    expect(task.results!.map((r) => r.title)).toEqual(['Cats']);
    const ranked = [...pictures].sort((a, b) => similarity(b) - similarity(a));
    expect(task.images!.map((image) => image.title)).toEqual(ranked);
    for (const image of task.images!) expect(image.score).toBeCloseTo(similarity(image.title!), 5);
    expect(task.images!.find((image) => image.title === pictures[0])).toMatchObject({
      url: 'https://example.com/photo.jpg',
      page_url: 'https://example.com/gallery',
      alt: 'picture 0',
      source: 'api',
    });

    const withoutImages = await search({ query });
    expect(withoutImages.images ?? []).toEqual([]);
  });

  it('refuses image documents it can not take, with a 4xx', async () => {
    const both = await post('/v1/web-search/index/documents', {
      documents: [{ text: 'a text', image: dataUri(pictures[0]!) }],
    });
    expect(both.statusCode).toBe(400);
    const broken = await post('/v1/web-search/index/documents', {
      documents: [{ image: 'data:image/png;base64,AAAA' }],
    });
    expect(broken.statusCode).toBe(400);
    expect(broken.json<{ error: { code: string; param: string } }>().error).toMatchObject({
      code: 'invalid_image',
      param: 'documents[0].image',
    });
    const gif = await post('/v1/web-search/index/documents', {
      documents: [{ image: `data:image/gif;base64,${Buffer.from('GIF89a\x01\x00\x01\x00').toString('base64')}` }],
    });
    expect(gif.statusCode).toBe(415);

    const textOnly = await startServer({ ...writer, modelsDir, models: [textModel], workers: 1 });
    try {
      const refused = await post(
        '/v1/web-search/index/documents',
        { documents: [{ image: dataUri(pictures[0]!) }] },
        textOnly,
      );
      expect(refused.statusCode).toBe(400);
      expect(refused.body).toContain('ONNX_GATEWAY_SEARCH_IMAGE_MODEL');
    } finally {
      await textOnly.close();
    }
    await expect(startServer({ modelsDir, models: [textModel], searchImageModel: textModel })).rejects.toThrow(
      /embeds no images/,
    );
  });

  it('adds a folder of images with index add --images', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'onnx-gateway-image-folder-'));
    mkdirSync(join(folder, 'nested'));
    copyFileSync(join(dir, clip, 'golden-images', pictures[0]!), join(folder, pictures[0]!));
    copyFileSync(join(dir, clip, 'golden-images', pictures[1]!), join(folder, 'nested', pictures[1]!));
    const dataDir = mkdtempSync(join(tmpdir(), 'onnx-gateway-image-index-'));
    const args = ['index', 'add', '--images', folder, '--data-dir', dataDir, '--models-dir', modelsDir];
    const { stdout } = await run('node', [
      'dist/cli/index.js',
      ...args,
      '--models',
      textModel,
      '--search-image-model',
      clip,
    ]);
    expect(JSON.parse(stdout)).toMatchObject({ documents: 0, images: { documents: 2, vectors: { [clip]: 2 } } });

    const onFolder = await startServer({ modelsDir, models: [textModel], searchImageModel: clip, dataDir, workers: 1 });
    try {
      const task = await search({ query, includeImages: true }, onFolder);
      expect(task.images!.map((image) => basename(new URL(image.url).pathname))).toEqual(
        [pictures[0]!, pictures[1]!].sort((a, b) => similarity(b) - similarity(a)),
      );
      expect(task.images!.map((image) => image.source)).toContain(join('nested', pictures[1]!));
    } finally {
      await onFolder.close();
    }
  });

  describe('with SearXNG', () => {
    let thumbnails: HttpServer;
    let searxng: StandInSearxng;
    let onSearxng: Server;

    beforeAll(async () => {
      thumbnails = createServer((request, response) => {
        const file = decodeURIComponent((request.url ?? '/').slice(1));
        if (!pictures.includes(file)) return response.writeHead(404).end();
        response.writeHead(200, { 'content-type': 'image/png' }).end(picture(file));
      });
      await new Promise<void>((resolve) => thumbnails.listen(0, '127.0.0.1', resolve));
      const base = `http://127.0.0.1:${(thumbnails.address() as AddressInfo).port}`;
      searxng = await startStandInSearxng('ok', [
        ...pictures.map((file) => imageResult(file, `https://images.example.org/${file}`, `${base}/${file}`)),
        imageResult('gone', `${base}/missing.png`),
      ]);
      onSearxng = await startServer({
        modelsDir,
        models: [textModel],
        searchImageModel: clip,
        searchProvider: 'searxng',
        searxngUrl: searxng.url,
        // The thumbnails are on loopback here.
        readerAllowPrivate: true,
        workers: 1,
      });
    }, 120_000);
    afterAll(async () => {
      await onSearxng?.close();
      await searxng?.close();
      await new Promise((resolve) => thumbnails?.close(resolve));
    });

    it('orders its image results by what their thumbnails show, one it can not fetch last', async () => {
      const task = await search({ query, includeImages: true }, onSearxng);
      expect(task.state).toBe('succeeded');
      const ranked = [...pictures].sort((a, b) => similarity(b) - similarity(a));
      expect(task.images!.map((image) => image.title)).toEqual([...ranked, 'gone']);
      for (const image of task.images!.slice(0, -1)) expect(image.score).toBeCloseTo(similarity(image.title!), 5);
      expect(task.images!.at(-1)!.score).toBeUndefined();
    });
  });
});
