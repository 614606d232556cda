/**
 * Every shape a client sends inputs in, read into the items core receives (recorded in place of
 * core's embed, test/helpers/embed-recorder.ts): OpenAI's content parts, vLLM's messages,
 * Infinity's modality, Jina's items, Cohere's images and inputs (and the cohere-ai client itself),
 * image URLs fetched from a local server; and every bad input with its status and code, refused
 * before core sees it.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { CohereClientV2 } from 'cohere-ai';
import sharp from 'sharp';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { EmbeddingInput, EmbeddingItem } from '../../src/core/embeddings.js';
import type { ErrorBody } from '../helpers/bodies.js';
import { useFakeApp } from '../helpers/fake-core.js';
import { dataUri, encoded, gif, pngHeader, randomBytes } from '../helpers/image-bytes.js';
import { testKey } from '../helpers/server.js';

const recorder = vi.hoisted(() => ({
  current: undefined as import('../helpers/embed-recorder.js').EmbedRecorder | undefined,
}));
vi.mock('../../src/core/embeddings.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/core/embeddings.js')>();
  const { embedRecorder } = await import('../helpers/embed-recorder.js');
  recorder.current = embedRecorder(real.embed);
  return { ...real, embed: recorder.current.embed };
});
const recorded = () => recorder.current!;

let png: Buffer;
let jpeg: Buffer;
let webp: Buffer;
/** PNGs of noise: about 3.6 KB (under the small app's 4 KB image limit) and about 12 KB (over it). */
let smallNoise: Buffer;
let largeNoise: Buffer;
const noisePng = (side: number, seed: number) =>
  sharp(randomBytes(side * side * 3, seed), { raw: { width: side, height: side, channels: 3 } })
    .png()
    .toBuffer();

/** A PNG header that passes the checks, for the tables of cases (made before the files above are). */
const headerPng = dataUri(pngHeader(12, 8));

/** What core receives for an image of these bytes. */
const imageOf = (bytes: Uint8Array) => ({ image: new Uint8Array(bytes) });
/** The recorded input with every image's bytes as a plain Uint8Array, comparable with imageOf. */
function plain(input: EmbeddingInput | undefined): unknown {
  if (!Array.isArray(input)) return input;
  const item = (value: EmbeddingItem): unknown =>
    typeof value === 'string'
      ? value
      : 'image' in value
        ? imageOf(value.image)
        : { parts: value.parts.map((part) => item(part)) };
  return (input as EmbeddingItem[]).map((value) => (typeof value === 'object' ? item(value) : value));
}

let imageServer: Server;
let origin: string;
const sockets = new Set<Socket>();
beforeAll(async () => {
  [png, jpeg, webp, smallNoise, largeNoise] = await Promise.all([
    encoded('png', 12, 8),
    encoded('jpeg', 16, 16),
    encoded('webp', 10, 6),
    noisePng(34, 3),
    noisePng(64, 5),
  ]);
  imageServer = createServer((request, response) => {
    const files: Record<string, Buffer> = {
      '/cat.png': png,
      '/small-1.png': smallNoise,
      '/small-2.png': Buffer.concat([smallNoise]),
      '/small-3.png': Buffer.concat([smallNoise]),
      '/large.png': largeNoise,
      '/anim.gif': gif,
      '/bomb.png': pngHeader(20_000, 20_000),
    };
    const file = files[request.url ?? ''];
    if (file) response.writeHead(200, { 'content-type': 'application/octet-stream' }).end(file);
    else if (request.url === '/moved') response.writeHead(302, { location: '/cat.png' }).end();
    else response.writeHead(404).end('not here');
  });
  imageServer.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => imageServer.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(imageServer.address() as AddressInfo).port}`;
});
afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await new Promise((resolve) => imageServer.close(resolve));
});
beforeEach(() => {
  recorded().requests.length = 0;
});

const server = useFakeApp();
/** Image URLs on, reaching loopback (the image server stands for the web), small limits. */
const fetching = useFakeApp({
  imageUrls: true,
  readerAllowPrivate: true,
  embeddingImageMaxBytes: 4096,
  bodyLimit: 10_000,
  maxInputs: 8,
});
/** Image URLs on with the reader's address policy as it ships. */
const guarded = useFakeApp({ imageUrls: true });

async function expectError(
  res: { statusCode: number; json: <T>() => T },
  status: number,
  code: string,
  param?: string | null,
) {
  expect(res.statusCode).toBe(status);
  const { error } = res.json<ErrorBody>();
  expect(error.code).toBe(code);
  if (param !== undefined) expect(error.param).toBe(param);
  return error;
}

describe('POST /v1/embeddings: the shapes of OpenAI, vLLM, Infinity and Jina', () => {
  it('passes texts and token ids to core unchanged', async () => {
    for (const input of ['hello', ['a', 'b'], [1, 2, 3], [[1, 2], [3]]]) {
      const res = await server.post('/v1/embeddings', { model: 'tiny-embedder', input });
      expect(res.statusCode, JSON.stringify(input)).toBe(200);
      expect(recorded().lastInput()).toEqual(input);
    }
  });

  it('reads strings, content parts, Jina items and arrays of parts into items, in order', async () => {
    const url = dataUri(png);
    const res = await server.post('/v1/embeddings', {
      model: 'tiny-embedder',
      input: [
        'a plain text',
        { type: 'text', text: 'an OpenAI text part' },
        { type: 'image_url', image_url: { url, detail: 'auto' } },
        { text: 'a Jina text' },
        { image: dataUri(jpeg, 'image/jpeg') },
        // Bare base64, wrapped in lines as MIME writes it.
        { image: webp.toString('base64').replace(/.{16}/g, '$&\n') },
        [
          { type: 'text', text: 'a caption' },
          { type: 'image_url', image_url: { url } },
        ],
        [
          { type: 'text', text: 'two text parts' },
          { type: 'text', text: 'are one text' },
        ],
        [{ type: 'image_url', image_url: { url: dataUri(webp, 'image/webp') } }],
      ],
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(plain(recorded().lastInput())).toEqual([
      'a plain text',
      'an OpenAI text part',
      imageOf(png),
      'a Jina text',
      imageOf(jpeg),
      imageOf(webp),
      { parts: ['a caption', imageOf(png)] },
      'two text parts\nare one text',
      imageOf(webp),
    ]);
    const data = res.json<{ data: { index: number; embedding: number[] }[] }>().data;
    expect(data.map((d) => [d.index, d.embedding[0]])).toEqual(Array.from({ length: 9 }, (_, i) => [i, i]));
  });

  it('reads the same on the engine paths', async () => {
    for (const path of ['/v1/engines/tiny-embedder/embeddings']) {
      const res = await server.post(path, { input: ['x', { image: dataUri(png) }] });
      expect(res.statusCode, res.body).toBe(200);
      expect(plain(recorded().lastInput())).toEqual(['x', imageOf(png)]);
      expect(recorded().requests.at(-1)!.model).toBe('tiny-embedder');
    }
  });

  it("reads vLLM's messages as one input: the parts of every message, in order", async () => {
    const cases = [
      [
        [
          {
            role: 'user',
            content: [
              { type: 'image_url', image_url: { url: dataUri(png) } },
              { type: 'text', text: 'Represent the given image.' },
            ],
          },
        ],
        [{ parts: [imageOf(png), 'Represent the given image.'] }],
      ],
      [[{ role: 'user', content: [{ type: 'image_url', image_url: { url: dataUri(jpeg) } }] }], [imageOf(jpeg)]],
      [[{ role: 'user', content: 'just a text' }], ['just a text']],
      [
        [
          { role: 'system', content: 'first' },
          { role: 'user', content: [{ type: 'text', text: 'second' }] },
        ],
        ['first\nsecond'],
      ],
    ] as const;
    for (const [messages, items] of cases) {
      const res = await server.post('/v1/embeddings', { model: 'tiny-embedder', messages, encoding_format: 'float' });
      expect(res.statusCode, res.body).toBe(200);
      expect(plain(recorded().lastInput())).toEqual(items);
      expect(res.json<{ data: unknown[] }>().data).toHaveLength(1);
    }
  });

  it("reads Infinity's modality image: each string of input is an image", async () => {
    const res = await server.post('/v1/embeddings', {
      model: 'tiny-embedder',
      modality: 'image',
      input: [dataUri(png), dataUri(webp, 'image/webp')],
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(plain(recorded().lastInput())).toEqual([imageOf(png), imageOf(webp)]);
    await server.post('/v1/embeddings', { model: 'tiny-embedder', modality: 'image', input: dataUri(jpeg) });
    expect(plain(recorded().lastInput())).toEqual([imageOf(jpeg)]);
    // modality text is the default: strings are texts.
    await server.post('/v1/embeddings', { model: 'tiny-embedder', modality: 'text', input: ['a'] });
    expect(recorded().lastInput()).toEqual(['a']);
  });

  it('keeps unicode text parts as they are', async () => {
    const texts = ['日本語のテキスト', 'emoji 🧪🦀', 'עברית', 'e\u0301'];
    const res = await server.post('/v1/embeddings', {
      model: 'tiny-embedder',
      input: [...texts.map((text) => ({ type: 'text', text })), { image: dataUri(png) }],
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(plain(recorded().lastInput())).toEqual([...texts, imageOf(png)]);
  });

  it('answers usage as core counts it', async () => {
    const res = await server.post('/v1/embeddings', { model: 'tiny-embedder', input: [{ image: dataUri(png) }, 'a'] });
    expect(res.json<{ usage: unknown }>().usage).toEqual({ prompt_tokens: 2, total_tokens: 2 });
  });
});

describe('POST /v1/embeddings: bad input, refused before core', () => {
  const post = (input: unknown, extra: object = {}) =>
    server.post('/v1/embeddings', { model: 'tiny-embedder', input, ...extra });

  it.each([
    ['broken base64', { image: 'data:image/png;base64,@@@notbase64' }, 'input[0].image'],
    ['base64 of the wrong length', { image: 'iVBORw0KG' }, 'input[0].image'],
    ['a data URI that is not base64', { image: 'data:image/png,%89PNG' }, 'input[0].image'],
    [
      'a data URI of text',
      { image: `data:text/plain;base64,${Buffer.from('hi').toString('base64')}` },
      'input[0].image',
    ],
    ['a data URI without data', { image: 'data:image/png;base64' }, 'input[0].image'],
    [
      'bytes that are no image',
      { type: 'image_url', image_url: { url: dataUri(randomBytes(300)) } },
      'input[0].image_url.url',
    ],
    ['a truncated PNG', { image: dataUri(pngHeader(12, 8).subarray(0, 20)) }, 'input[0].image'],
    ['a relative path', { image: 'cat.png' }, 'input[0].image'],
  ])('%s: 400 invalid_image', async (_name, item, param) => {
    await expectError(await post([item]), 400, 'invalid_image', param);
    expect(recorded().requests).toEqual([]);
  });

  it('a GIF: 415 naming the format', async () => {
    const error = await expectError(
      await post([{ image: dataUri(gif, 'image/gif') }]),
      415,
      'unsupported_media_type',
      'input[0].image',
    );
    expect(error.message).toBe('input[0].image is GIF; send PNG, JPEG or WebP.');
  });

  it('a 20,000 x 20,000 PNG header: refused from the header, naming the limit and its setting', async () => {
    const error = await expectError(
      await post([
        'a',
        [
          { type: 'text', text: 'b' },
          { type: 'image_url', image_url: { url: dataUri(pngHeader(20_000, 20_000)) } },
        ],
      ]),
      400,
      'invalid_image',
      'input[1][1].image_url.url',
    );
    expect(error.message).toMatch(
      /20000x20000 pixels, over the limit of 16777216 pixels \(ONNX_GATEWAY_IMAGE_MAX_PIXELS\)/,
    );
    expect(recorded().requests).toEqual([]);
  });

  it('an image over the byte limit: 413 naming the setting', async () => {
    const res = await fetching.post('/v1/embeddings', {
      model: 'tiny-embedder',
      input: [{ image: dataUri(largeNoise) }],
    });
    // The body is over the small app's body limit too; what is refused first is the body.
    expect(res.statusCode).toBe(413);
    const oneImage = await fetching.post('/v1/embeddings', {
      model: 'tiny-embedder',
      input: [{ image: dataUri(Buffer.concat([smallNoise, Buffer.alloc(1000)])) }],
    });
    const error = await expectError(oneImage, 413, 'payload_too_large', 'input[0].image');
    expect(error.message).toMatch(
      /over the limit of 4096 bytes for an image \(ONNX_GATEWAY_EMBEDDING_IMAGE_MAX_BYTES\)/,
    );
  });

  it('an image URL where the server fetches none: 400 naming the setting', async () => {
    const error = await expectError(
      await post([{ image: `${origin}/cat.png` }]),
      400,
      'invalid_image',
      'input[0].image',
    );
    expect(error.message).toMatch(/ONNX_GATEWAY_IMAGE_URLS=true/);
  });

  it.each([
    ['image_url of a number', [{ type: 'image_url', image_url: 5 }], 'input[0].image_url'],
    ['image_url.url missing', [{ type: 'image_url', image_url: {} }], 'input[0].image_url.url'],
    ['an unknown part type', ['a', { type: 'input_audio', input_audio: {} }], 'input[1].type'],
    ['an object of no shape', [{ foo: 1 }], 'input[0]'],
    ['text and image in one Jina item', [{ text: 'a', image: headerPng }], 'input[0]'],
    ['an empty text part', [{ type: 'text', text: '' }], 'input[0].text'],
    ['a text part of a number', [{ type: 'text', text: 5 }], 'input[0].text'],
    ['an empty image', [{ image: '' }], 'input[0].image'],
    ['an empty array of parts', ['a', []], 'input[1]'],
    // The schema refuses what is neither a string, an object nor an array, naming input.
    ['a number among parts', [[{ text: 'a' }, 7]], 'input'],
    ['an empty string among items', ['', { image: headerPng }], 'input[0]'],
    ['a number among items', [{ text: 'a' }, 3], 'input'],
    ['an empty input', [], 'input'],
    ['an empty string', '', 'input[0]'],
  ])('%s: 400 invalid_request naming the field', async (_name, input, param) => {
    await expectError(await post(input), 400, 'invalid_request', param);
  });

  it.each([
    ['input and messages', { input: 'a', messages: [{ role: 'user', content: 'b' }] }, 'messages'],
    ['neither input nor messages', {}, 'input'],
    ['empty messages', { messages: [] }, 'messages'],
    ['a message without content', { messages: [{ role: 'user' }] }, 'messages[0].content'],
    ['a message of empty parts', { messages: [{ role: 'user', content: [] }] }, 'messages[0].content'],
    ['modality image with parts', { modality: 'image', input: [{ text: 'a' }] }, 'input'],
    ['modality image with messages', { modality: 'image', messages: [{ role: 'user', content: 'a' }] }, 'modality'],
    ['modality audio', { modality: 'audio', input: ['a'] }, 'modality'],
  ])('%s: 400 invalid_request', async (_name, body, param) => {
    await expectError(
      await server.post('/v1/embeddings', { model: 'tiny-embedder', ...body }),
      400,
      'invalid_request',
      param,
    );
  });

  it('refuses more items than maxInputs before loading any image', async () => {
    const input = Array.from({ length: 9 }, () => ({ image: `${origin}/cat.png` }));
    const error = await expectError(await fetching.post('/v1/embeddings', { input }), 400, 'invalid_request', 'input');
    expect(error.message).toBe('input has 9 items; at most 8 are accepted per request.');
  });

  it('answers every malformed shape with a 4xx, never a 5xx', async () => {
    const values: unknown[] = [null, true, 0, -1, 1.5, '', 'x', [], {}, [[]], [null], [{}], { type: null }];
    const shapes = values.flatMap((value) => [
      { input: value },
      { input: [value] },
      { input: ['a', value] },
      { input: [{ type: 'image_url', image_url: value }] },
      { input: [{ type: 'image_url', image_url: { url: value } }] },
      { input: [{ image: value }] },
      { input: [[{ text: 'a' }, value]] },
      { messages: value },
      { messages: [value] },
      { messages: [{ role: 'user', content: value }] },
      { modality: 'image', input: value },
    ]);
    for (const body of shapes) {
      const res = await server.post('/v1/embeddings', { model: 'tiny-embedder', ...body });
      expect(res.statusCode, JSON.stringify(body)).toBeLessThan(500);
      if (res.statusCode !== 200) expect(res.statusCode, JSON.stringify(body)).toBeGreaterThanOrEqual(400);
    }
  });
});

describe('image URLs, fetched through the web reader', () => {
  const post = (app: typeof fetching, input: unknown) => app.post('/v1/embeddings', { model: 'tiny-embedder', input });

  it('fetches an image URL, following redirects, and hands core its bytes', async () => {
    const res = await post(fetching, [
      { image: `${origin}/cat.png` },
      { type: 'image_url', image_url: { url: `${origin}/moved` } },
    ]);
    expect(res.statusCode, res.body).toBe(200);
    expect(plain(recorded().lastInput())).toEqual([imageOf(png), imageOf(png)]);
  });

  it('checks fetched bytes as it checks sent ones', async () => {
    await expectError(
      await post(fetching, [{ image: `${origin}/anim.gif` }]),
      415,
      'unsupported_media_type',
      'input[0].image',
    );
    await expectError(await post(fetching, [{ image: `${origin}/bomb.png` }]), 400, 'invalid_image', 'input[0].image');
    const large = await expectError(
      await post(fetching, ['a', { image: `${origin}/large.png` }]),
      413,
      'payload_too_large',
      'input[1].image',
    );
    expect(large.message).toMatch(/4096 bytes.*ONNX_GATEWAY_EMBEDDING_IMAGE_MAX_BYTES/);
    expect(recorded().requests).toEqual([]);
  });

  it('refuses images that together pass the body limit', async () => {
    const input = [1, 2, 3].map((n) => ({ image: `${origin}/small-${n}.png` }));
    expect(smallNoise.length).toBeGreaterThan(10_000 / 3);
    expect(smallNoise.length).toBeLessThan(4096);
    const error = await expectError(await post(fetching, input), 413, 'payload_too_large');
    expect(error.message).toMatch(/more than 10000 bytes \(ONNX_GATEWAY_BODY_LIMIT\)/);
  });

  it('answers a missing image as the reader answers a missing page', async () => {
    const error = await expectError(await post(fetching, [{ image: `${origin}/missing.png` }]), 502, 'upstream_error');
    expect(error.message).toBe('The image of input[0].image answered HTTP 404.');
  });

  it('refuses URLs of other schemes', async () => {
    await expectError(
      await post(fetching, [{ image: 'ftp://example.com/cat.png' }]),
      400,
      'invalid_image',
      'input[0].image',
    );
  });

  it("refuses private addresses under the reader's policy, naming neither host nor address", async () => {
    const error = await expectError(
      await post(guarded, [{ image: `${origin}/cat.png` }]),
      400,
      'invalid_request',
      'input[0].image',
    );
    expect(error.message).toBe(
      'The reader does not fetch the URL of input[0].image: its host does not resolve to an address the reader may fetch.',
    );
    const named = await expectError(
      await post(guarded, [{ image: `http://localhost:${new URL(origin).port}/cat.png` }]),
      400,
      'invalid_request',
    );
    expect(named.message).not.toMatch(/localhost|127\.0\.0\.1/);
  });
});

describe('Cohere POST /v2/embed', () => {
  it('embeds images (data URIs) with input_type image, describing each', async () => {
    const res = await server.post('/v2/embed', {
      model: 'tiny-embedder',
      input_type: 'image',
      images: [dataUri(png), dataUri(jpeg, 'image/jpeg')],
      embedding_types: ['float'],
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(plain(recorded().lastInput())).toEqual([imageOf(png), imageOf(jpeg)]);
    const body = res.json<{ images: unknown; texts?: unknown; embeddings: { float: number[][] }; meta: unknown }>();
    expect(body.images).toEqual([
      { width: 12, height: 8, format: 'png', bit_depth: 8 },
      { width: 16, height: 16, format: 'jpeg', bit_depth: 8 },
    ]);
    expect(body.texts).toBeUndefined();
    expect(body.embeddings.float).toHaveLength(2);
    expect(body.meta).toEqual({ api_version: { version: '2' }, billed_units: { input_tokens: 2, images: 2 } });
  });

  it('reads inputs of content parts: texts joined, a lone image, text and image fused', async () => {
    const image = { type: 'image_url', image_url: { url: dataUri(png) } };
    const res = await server.post('/v2/embed', {
      model: 'tiny-embedder',
      input_type: 'search_document',
      inputs: [
        {
          content: [
            { type: 'text', text: 'a' },
            { type: 'text', text: 'b' },
          ],
        },
        { content: [image] },
        { content: [{ type: 'text', text: 'a photo of a cat' }, image] },
      ],
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(plain(recorded().lastInput())).toEqual([
      'a\nb',
      imageOf(png),
      { parts: ['a photo of a cat', imageOf(png)] },
    ]);
    expect(recorded().requests.at(-1)!.inputType).toBe('document');
  });

  it('answers texts for inputs that are all text, as before', async () => {
    const res = await server.post('/v2/embed', {
      model: 'tiny-embedder',
      inputs: [{ content: [{ type: 'text', text: 'hello' }] }],
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<{ texts: string[] }>().texts).toEqual(['hello']);
  });

  it.each([
    ['texts and images', { texts: ['a'], images: [headerPng] }, 400, 'invalid_request', 'images'],
    [
      'images and inputs',
      { images: [headerPng], inputs: [{ content: [{ type: 'text', text: 'a' }] }] },
      400,
      'invalid_request',
      'inputs',
    ],
    ['no inputs at all', {}, 400, 'invalid_request', 'texts'],
    ['empty images', { images: [] }, 400, 'invalid_request', 'images'],
    ['empty content', { inputs: [{ content: [] }] }, 400, 'invalid_request', 'inputs[0].content'],
    ['a GIF', { images: [dataUri(gif, 'image/gif')] }, 415, 'unsupported_media_type', 'images[0]'],
    ['broken base64', { images: ['data:image/png;base64,!!!'] }, 400, 'invalid_image', 'images[0]'],
    [
      'an unknown part',
      { inputs: [{ content: [{ type: 'video', video: 'x' }] }] },
      400,
      'invalid_request',
      'inputs[0].content[0].type',
    ],
    [
      'a bomb',
      { inputs: [{ content: [{ type: 'image_url', image_url: { url: dataUri(pngHeader(20_000, 20_000)) } }] }] },
      400,
      'invalid_image',
      'inputs[0].content[0].image_url.url',
    ],
  ])('%s', async (_name, body, status, code, param) => {
    await expectError(await server.post('/v2/embed', { model: 'tiny-embedder', ...body }), status, code, param);
    expect(recorded().requests).toEqual([]);
  });

  it('works with the cohere-ai client unchanged: images, and inputs of text and image parts', async () => {
    const base = await server.app().listen({ host: '127.0.0.1', port: 0 });
    const cohere = new CohereClientV2({ token: testKey, baseUrl: base, maxRetries: 0 });
    const images = await cohere.embed({
      model: 'tiny-embedder',
      inputType: 'image',
      images: [dataUri(png)],
      embeddingTypes: ['float', 'base64'],
    });
    expect(plain(recorded().lastInput())).toEqual([imageOf(png)]);
    expect(images.embeddings.float).toHaveLength(1);
    expect(images.embeddings.base64).toHaveLength(1);
    expect(images.images).toEqual([{ width: 12, height: 8, format: 'png', bitDepth: 8 }]);
    expect(images.meta?.billedUnits?.images).toBe(1);

    await cohere.embed({
      model: 'tiny-embedder',
      inputType: 'search_query',
      inputs: [
        { content: [{ type: 'text', text: 'a cat' }] },
        { content: [{ type: 'image_url', imageUrl: { url: dataUri(webp, 'image/webp') } }] },
      ],
      embeddingTypes: ['float'],
    });
    expect(plain(recorded().lastInput())).toEqual(['a cat', imageOf(webp)]);
  });
});
