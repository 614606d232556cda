/**
 * POST /v1/images/edits end to end on tiny generated image models whose outputs are known exactly
 * (test/fixtures/tiny-image-model.ts): JSON and multipart (the OpenAI SDK), sizes, formats,
 * alpha, EXIF orientation, accounting, bad input, and isolation from the text lane.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from '../../src/main.js';
import { writeTinyImageModels } from '../fixtures/tiny-image-model.js';
import type { EditedImages, ErrorBody, ModelCard } from '../helpers/bodies.js';
import { auth, startServer, testKey } from '../helpers/server.js';

let server: Server;
let baseURL: string;
let imageDir: string;
const bodyLimit = 4 * 1024 * 1024;

beforeAll(async () => {
  imageDir = await mkdtemp(join(tmpdir(), 'onnx-gateway-images-'));
  await writeTinyImageModels(imageDir);
  server = await startServer({
    imageModels: ['tiny-upscaler', 'tiny-upscaler-heavy', 'tiny-matte', 'tiny-style-invert'],
    imageModelsDir: imageDir,
    imageWorkers: 1,
    imageIntraOpThreads: 1,
    imageBodyLimit: bodyLimit,
  });
  baseURL = `${await server.app.listen({ port: 0, host: '127.0.0.1' })}/v1`;
});

afterAll(async () => {
  await server?.close();
  await rm(imageDir, { recursive: true, force: true });
});

/** A deterministic noise image (PNG): every pixel differs from its neighbours, so resampling shows. */
async function noisePng(width: number, height: number, channels: 3 | 4 = 3): Promise<{ png: Buffer; raw: Uint8Array }> {
  const raw = new Uint8Array(width * height * channels);
  let state = 12345;
  for (let i = 0; i < raw.length; i++) {
    state = (state * 1103515245 + 12345) >>> 0;
    raw[i] = state >>> 24;
  }
  return { png: await sharp(raw, { raw: { width, height, channels } }).png().toBuffer(), raw };
}

async function decode(base64: string) {
  const bytes = Buffer.from(base64, 'base64');
  const { data, info } = await sharp(bytes).raw().toBuffer({ resolveWithObject: true });
  const metadata = await sharp(bytes).metadata();
  return { data, info, format: metadata.format };
}

async function edit(payload: Record<string, unknown>) {
  return server.app.inject({ method: 'POST', url: '/v1/images/edits', headers: auth, payload });
}

describe('GET /v1/models', () => {
  it('lists the image pipelines beside the text models, with their task, scale and where they run', async () => {
    const res = await server.app.inject({ method: 'GET', url: '/v1/models', headers: auth });
    const data = res.json<{ data: ModelCard[] }>().data;
    expect(data.find((m) => m.id === 'tiny-upscaler')).toMatchObject({ task: 'super-resolution', scale: 2 });
    // The image lane's threads (imageWorkers), each with a session of every pipeline (imageIntraOpThreads).
    expect(data.find((m) => m.id === 'tiny-upscaler')!.placement).toEqual({
      device: 'cpu',
      sessions: 1,
      threads_per_session: 1,
      solo_threads: 0,
    });
    expect(data.find((m) => m.id === 'tiny-matte')).toMatchObject({ task: 'background-removal', scale: 1 });
    expect(data.find((m) => m.id === 'tiny-embedder')).toMatchObject({ task: 'embedding' });
    const one = await server.app.inject({ method: 'GET', url: '/v1/models/tiny-style-invert', headers: auth });
    expect(one.json()).toMatchObject({ id: 'tiny-style-invert', task: 'style-transfer' });
  });
});

describe('POST /v1/images/edits (JSON)', () => {
  it('upscales exactly: the tiled x2 model output equals a nearest-neighbour upscale', async () => {
    const { png, raw } = await noisePng(150, 70);
    const response = await edit({ model: 'tiny-upscaler', prompt: 'make it bigger', image: [png.toString('base64')] });
    expect(response.statusCode).toBe(200);
    const body = response.json<EditedImages>();
    expect(body.size).toBe('300x140');
    expect(body.output_format).toBe('png');
    expect(body.background).toBe('opaque');
    expect(body.quality).toBe('medium');
    const { data, info } = await decode(body.data[0]!.b64_json!);
    expect([info.width, info.height, info.channels]).toEqual([300, 140, 3]);
    let mismatches = 0;
    for (let y = 0; y < 140; y++) {
      for (let x = 0; x < 300; x++) {
        for (let c = 0; c < 3; c++)
          if (data[(y * 300 + x) * 3 + c] !== raw[((y >> 1) * 150 + (x >> 1)) * 3 + c]) mismatches++;
      }
    }
    expect(mismatches).toBe(0);
    expect(body.data[0]!.revised_prompt).toMatch(
      /^Upscaled image\[0\] from 150x70 to 300x140 with tiny-upscaler \(x2 super-resolution, 1 pass/,
    );
    expect(body.data[0]!.revised_prompt).toMatch(/not otherwise interpreted/);
  });

  it.each([
    ['2048x2048', 2048, 2048],
    ['3840x2160', 3840, 2160],
  ])('makes exactly %s', async (size, width, height) => {
    const { png } = await noisePng(256, 256);
    const response = await edit({
      model: 'tiny-upscaler',
      prompt: 'upscale',
      image: png.toString('base64'),
      size,
      quality: 'low',
    });
    expect(response.statusCode).toBe(200);
    const body = response.json<EditedImages>();
    expect(body.size).toBe(size);
    const { info } = await decode(body.data[0]!.b64_json!);
    expect([info.width, info.height]).toEqual([width, height]);
    // 256 -> 2048 is x8: three passes of x2; 256x144 (the 16:9 centre) -> 3840x2160 is x15: four passes.
    expect(body.data[0]!.revised_prompt).toMatch(
      size === '2048x2048' ? /3 passes/ : /Cropped image\[0\] from 256x256 to its centre 256x144.* 4 passes/,
    );
  });

  it('picks the pipeline from the prompt when no model is named, and refuses a prompt it can not do', async () => {
    const { png } = await noisePng(40, 40);
    const upscale = await edit({ prompt: 'Upscale this to 4K please', image: png.toString('base64'), size: '80x80' });
    expect(upscale.statusCode).toBe(200);
    expect(upscale.headers['x-image-model']).toBe('tiny-upscaler');
    expect(upscale.json<EditedImages>().data[0]!.revised_prompt).toMatch(
      /Chosen from the prompt's words; nothing else in the prompt was done\./,
    );
    const style = await edit({ prompt: 'paint it in the invert style', image: png.toString('base64') });
    expect(style.headers['x-image-model']).toBe('tiny-style-invert');
    const cutout = await edit({ prompt: 'remove the background', image: png.toString('base64') });
    expect(cutout.headers['x-image-model']).toBe('tiny-matte');

    const refused = await edit({ prompt: 'give the cat a hat', image: png.toString('base64') });
    expect(refused.statusCode).toBe(400);
    expect(refused.json<ErrorBody>().error).toMatchObject({ code: 'invalid_request', param: 'prompt' });
    expect(refused.json<ErrorBody>().error.message).toMatch(/upscale/);
  });

  it('answers data URIs for response_format url and plain base64 for b64_json, in the asked format', async () => {
    const { png } = await noisePng(30, 20);
    const url = await edit({
      model: 'tiny-upscaler',
      prompt: 'x',
      image: `data:image/png;base64,${png.toString('base64')}`,
      response_format: 'url',
      output_format: 'webp',
    });
    expect(url.statusCode).toBe(200);
    const item = url.json<EditedImages>().data[0]!;
    expect(item.b64_json).toBeUndefined();
    expect(item.url).toMatch(/^data:image\/webp;base64,/);
    expect((await decode(item.url!.split(',')[1]!)).format).toBe('webp');

    const jpeg = await edit({
      model: 'tiny-upscaler',
      prompt: 'x',
      image: png.toString('base64'),
      output_format: 'jpeg',
      output_compression: 50,
    });
    const body = jpeg.json<EditedImages>();
    expect(body.output_format).toBe('jpeg');
    expect(body.data[0]!.url).toBeUndefined();
    expect((await decode(body.data[0]!.b64_json!)).format).toBe('jpeg');
  });

  it('reports usage deterministically: 64x64 tiles of input and output, and the prompt tokens', async () => {
    const { png } = await noisePng(100, 60);
    const first = (
      await edit({ model: 'tiny-upscaler', prompt: 'upscale the photo', image: png.toString('base64') })
    ).json<EditedImages>();
    const again = (
      await edit({ model: 'tiny-upscaler', prompt: 'upscale the photo', image: png.toString('base64') })
    ).json<EditedImages>();
    expect(first.usage).toEqual(again.usage);
    const { usage } = first;
    expect(usage.input_tokens_details.image_tokens).toBe(2 * 1);
    expect(usage.output_tokens_details).toEqual({ image_tokens: 4 * 2, text_tokens: 0 });
    expect(usage.input_tokens_details.text_tokens).toBeGreaterThan(0);
    expect(usage.input_tokens).toBe(usage.input_tokens_details.image_tokens + usage.input_tokens_details.text_tokens);
    expect(usage.total_tokens).toBe(usage.input_tokens + usage.output_tokens);
    const longer = (
      await edit({
        model: 'tiny-upscaler',
        prompt: 'upscale the photo upscale the photo',
        image: png.toString('base64'),
      })
    ).json<EditedImages>();
    expect(longer.usage.input_tokens_details.text_tokens).toBeGreaterThan(usage.input_tokens_details.text_tokens);
  });

  it('edits each image of a request on its own: one output per input, in order', async () => {
    const [a, b] = [await noisePng(20, 10), await noisePng(30, 30)];
    const body = (
      await edit({ model: 'tiny-upscaler', prompt: 'x', image: [a.png.toString('base64'), b.png.toString('base64')] })
    ).json<EditedImages>();
    expect(body.data).toHaveLength(2);
    expect(body.size).toBe('40x20,60x60');
    expect((await decode(body.data[0]!.b64_json!)).info.width).toBe(40);
    expect((await decode(body.data[1]!.b64_json!)).info.width).toBe(60);
    expect(body.data[1]!.revised_prompt).toMatch(/^Upscaled image\[1\]/);
    expect(body.usage.input_tokens_details.image_tokens).toBe(1 + 1);
  });

  it('honours EXIF orientation', async () => {
    // 40 wide, 20 high as stored; orientation 6 means it is shown rotated: 20 wide, 40 high.
    const jpeg = await sharp({ create: { width: 40, height: 20, channels: 3, background: { r: 200, g: 50, b: 50 } } })
      .jpeg()
      .withMetadata({ orientation: 6 })
      .toBuffer();
    const response = await edit({ model: 'tiny-upscaler', prompt: 'x', image: jpeg.toString('base64') });
    expect(response.statusCode).toBe(200);
    expect(response.json<EditedImages>().size).toBe('40x80');
  });

  it('keeps the alpha channel of an image that has one', async () => {
    const raw = new Uint8Array(64 * 32 * 4);
    for (let y = 0; y < 32; y++) {
      for (let x = 0; x < 64; x++) raw.set([255, 128, 0, x < 32 ? 0 : 255], (y * 64 + x) * 4);
    }
    const png = await sharp(raw, { raw: { width: 64, height: 32, channels: 4 } })
      .png()
      .toBuffer();
    const body = (
      await edit({ model: 'tiny-upscaler', prompt: 'x', image: png.toString('base64') })
    ).json<EditedImages>();
    expect(body.background).toBe('transparent');
    const { data, info } = await decode(body.data[0]!.b64_json!);
    expect([info.width, info.height, info.channels]).toEqual([128, 64, 4]);
    expect(data[(32 * 128 + 10) * 4 + 3]).toBe(0);
    expect(data[(32 * 128 + 120) * 4 + 3]).toBe(255);

    const opaque = (
      await edit({ model: 'tiny-upscaler', prompt: 'x', image: png.toString('base64'), background: 'opaque' })
    ).json<EditedImages>();
    expect(opaque.background).toBe('opaque');
    const flat = await decode(opaque.data[0]!.b64_json!);
    expect(flat.info.channels).toBe(3);
    expect([...flat.data.subarray((32 * 128 + 10) * 3, (32 * 128 + 10) * 3 + 3)]).toEqual([255, 255, 255]);
    expect(opaque.data[0]!.revised_prompt).toMatch(/flattened onto white/);
  });

  it('stylises at the working size and brings the result to the size asked', async () => {
    const flat = await sharp({ create: { width: 50, height: 50, channels: 3, background: { r: 10, g: 100, b: 250 } } })
      .png()
      .toBuffer();
    const body = (
      await edit({ model: 'tiny-style-invert', prompt: 'x', image: flat.toString('base64'), size: '300x300' })
    ).json<EditedImages>();
    const { data, info } = await decode(body.data[0]!.b64_json!);
    expect([info.width, info.height]).toEqual([300, 300]);
    const centre = (150 * 300 + 150) * 3;
    expect([...data.subarray(centre, centre + 3)]).toEqual([245, 155, 5]);
    expect(body.data[0]!.revised_prompt).toMatch(/"invert" style with tiny-style-invert at 128x128/);
  });
});

describe('background removal', () => {
  /** A bright square subject on a dark plain background. */
  const subject = () =>
    sharp({ create: { width: 120, height: 80, channels: 3, background: { r: 5, g: 5, b: 5 } } })
      .composite([
        {
          input: { create: { width: 40, height: 40, channels: 3, background: { r: 250, g: 240, b: 230 } } },
          left: 40,
          top: 20,
        },
      ])
      .png()
      .toBuffer();

  it('cuts the subject out: alpha near 1 on it, near 0 at the border', async () => {
    const body = (
      await edit({ model: 'tiny-matte', prompt: 'x', image: (await subject()).toString('base64') })
    ).json<EditedImages>();
    expect(body.background).toBe('transparent');
    const { data, info } = await decode(body.data[0]!.b64_json!);
    expect([info.width, info.height, info.channels]).toEqual([120, 80, 4]);
    expect(data[(40 * 120 + 60) * 4 + 3]).toBeGreaterThan(240);
    for (const [x, y] of [
      [0, 0],
      [119, 79],
      [5, 40],
      [115, 40],
    ])
      expect(data[(y! * 120 + x!) * 4 + 3]).toBeLessThan(15);
  });

  it('puts the subject of the first image on the second', async () => {
    const scene = await sharp({
      create: { width: 200, height: 100, channels: 3, background: { r: 20, g: 160, b: 40 } },
    })
      .png()
      .toBuffer();
    const response = await edit({
      model: 'tiny-matte',
      prompt: 'x',
      image: [(await subject()).toString('base64'), scene.toString('base64')],
    });
    expect(response.statusCode).toBe(200);
    const body = response.json<EditedImages>();
    expect(body.size).toBe('200x100');
    expect(body.background).toBe('opaque');
    const { data, info } = await decode(body.data[0]!.b64_json!);
    expect(info.channels).toBe(3);
    const at = (x: number, y: number) => [...data.subarray((y * 200 + x) * 3, (y * 200 + x) * 3 + 3)];
    expect(at(100, 50).map((v, c) => Math.abs(v - [250, 240, 230][c]!))).toSatisfy((d: number[]) =>
      d.every((v) => v < 12),
    );
    expect(at(5, 5)).toEqual([20, 160, 40]);
    expect(body.data[0]!.revised_prompt).toMatch(/subject of image\[0\].*on image\[1\]/);
  });

  it('refuses a transparent JPEG and more than two images', async () => {
    const png = (await subject()).toString('base64');
    const jpeg = await edit({
      model: 'tiny-matte',
      prompt: 'x',
      image: png,
      output_format: 'jpeg',
      background: 'transparent',
    });
    expect(jpeg.statusCode).toBe(400);
    expect(jpeg.json<ErrorBody>().error.param).toBe('background');
    const three = await edit({ model: 'tiny-matte', prompt: 'x', image: [png, png, png] });
    expect(three.statusCode).toBe(400);
    expect(three.json<ErrorBody>().error.param).toBe('image');
  });
});

describe('bad input', () => {
  it('names the image that can not be used', async () => {
    const { png } = await noisePng(16, 16);
    const corrupt = png.subarray(0, 60).toString('base64');
    const response = await edit({ model: 'tiny-upscaler', prompt: 'x', image: [png.toString('base64'), corrupt] });
    expect(response.statusCode).toBe(400);
    expect(response.json<ErrorBody>().error).toMatchObject({ code: 'invalid_image', param: 'image[1]' });

    const text = await edit({
      model: 'tiny-upscaler',
      prompt: 'x',
      image: Buffer.from('just some text').toString('base64'),
    });
    expect(text.json<ErrorBody>().error).toMatchObject({ code: 'invalid_image', param: 'image[0]' });
    const notBase64 = await edit({ model: 'tiny-upscaler', prompt: 'x', image: '%%%' });
    expect(notBase64.json<ErrorBody>().error).toMatchObject({ code: 'invalid_image', param: 'image[0]' });
    const url = await edit({ model: 'tiny-upscaler', prompt: 'x', image: 'https://example.org/cat.png' });
    expect(url.json<ErrorBody>().error.message).toMatch(/does not fetch/);
  });

  it('refuses a decompression bomb from its header, before decoding it', async () => {
    // 5000x5000 of one colour: a few kB of PNG, 75 MB of pixels; over the 4096x4096 pixel limit.
    const bomb = await sharp({ create: { width: 5000, height: 5000, channels: 3, background: '#000' } })
      .png()
      .toBuffer();
    expect(bomb.length).toBeLessThan(200_000);
    const response = await edit({ model: 'tiny-upscaler', prompt: 'x', image: bomb.toString('base64') });
    expect(response.statusCode).toBe(400);
    expect(response.json<ErrorBody>().error).toMatchObject({ code: 'invalid_image', param: 'image[0]' });
    expect(response.json<ErrorBody>().error.message).toMatch(/5000x5000 pixels, over the limit/);
  });

  it.each([
    [{ size: '8192x8192' }, 'size'],
    [{ size: 'large' }, 'size'],
    [{ n: 2 }, 'n'],
    [{ mask: 'AAAA' }, 'mask'],
    [{ quality: 'ultra' }, 'quality'],
    [{ output_compression: 101 }, 'output_compression'],
  ])('answers 400 for %j', async (fields, param) => {
    const { png } = await noisePng(8, 8);
    const response = await edit({ model: 'tiny-upscaler', prompt: 'x', image: png.toString('base64'), ...fields });
    expect(response.statusCode).toBe(400);
    expect(response.json<ErrorBody>().error.param).toBe(param);
  });

  it('answers 404 for a model that is not served, and 413 over the body limit', async () => {
    const { png } = await noisePng(8, 8);
    const unknown = await edit({ model: 'gpt-image-1', prompt: 'x', image: png.toString('base64') });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json<ErrorBody>().error.code).toBe('model_not_found');
    const big = await edit({ model: 'tiny-upscaler', prompt: 'x', image: 'A'.repeat(bodyLimit + 1) });
    expect(big.statusCode).toBe(413);
    expect(big.json<ErrorBody>().error.code).toBe('payload_too_large');
  });
});

describe('the OpenAI SDK (multipart/form-data)', () => {
  const client = () => new OpenAI({ baseURL, apiKey: testKey, maxRetries: 0 });

  it('images.edit with one file', async () => {
    const { png, raw } = await noisePng(64, 48);
    const result = await client().images.edit({
      model: 'tiny-upscaler',
      image: await toFile(png, 'a.png', { type: 'image/png' }),
      prompt: 'upscale',
      size: '128x96',
    });
    expect(result.size).toBe('128x96');
    expect(result.usage?.output_tokens_details?.image_tokens).toBe(2 * 2);
    const { data, info } = await decode(result.data![0]!.b64_json!);
    expect([info.width, info.height]).toEqual([128, 96]);
    expect(data[(95 * 128 + 127) * 3]).toBe(raw[(47 * 64 + 63) * 3]);
  });

  it('images.edit with two files (image[]) and text fields', async () => {
    const subject = await sharp({ create: { width: 60, height: 60, channels: 3, background: '#fafafa' } })
      .png()
      .toBuffer();
    const scene = await sharp({ create: { width: 90, height: 60, channels: 3, background: '#202080' } })
      .jpeg()
      .toBuffer();
    const result = await client().images.edit({
      model: 'tiny-matte',
      image: [
        await toFile(subject, 'subject.png', { type: 'image/png' }),
        await toFile(scene, 'scene.jpg', { type: 'image/jpeg' }),
      ],
      prompt: 'put it on the blue background',
      output_format: 'webp',
      output_compression: 90,
      n: 1,
    });
    expect(result.size).toBe('90x60');
    expect(result.output_format).toBe('webp');
    expect((await decode(result.data![0]!.b64_json!)).format).toBe('webp');
  });

  it('counts the files of a form together against the body limit', async () => {
    const half = Buffer.alloc(bodyLimit / 2 + 1024, 1);
    const error = await client()
      .images.edit({
        model: 'tiny-upscaler',
        image: [await toFile(half, 'a.png'), await toFile(half, 'b.png')],
        prompt: 'x',
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(413);
    expect((error as InstanceType<typeof OpenAI.APIError>).error).toMatchObject({ code: 'payload_too_large' });
  });

  it('gets the catalogue error shape for bad multipart input', async () => {
    const error = await client()
      .images.edit({
        model: 'tiny-upscaler',
        image: await toFile(Buffer.from('not an image'), 'a.png', { type: 'image/png' }),
        prompt: 'x',
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({
      code: 'invalid_image',
      param: 'image[0]',
    });
  });
});

describe('a server without image models', () => {
  it('says so and how to serve some', async () => {
    const plain = await startServer();
    try {
      const { png } = await noisePng(8, 8);
      const response = await plain.app.inject({
        method: 'POST',
        url: '/v1/images/edits',
        headers: auth,
        payload: { prompt: 'upscale', image: png.toString('base64') },
      });
      expect(response.statusCode).toBe(404);
      expect(response.json<ErrorBody>().error).toMatchObject({ code: 'model_not_found', param: 'model' });
      expect(response.json<ErrorBody>().error.message).toMatch(/ONNX_GATEWAY_IMAGE_MODELS/);
    } finally {
      await plain.close();
    }
  });
});

describe('isolation', () => {
  it('an embeddings request completes while a 4K edit is running', async () => {
    // A smooth 2048x2048 image (small as PNG) upscaled x2 to 4096x4096 by the heavy test model.
    const gradient = await sharp({ create: { width: 2048, height: 2048, channels: 3, background: '#336699' } })
      .composite([
        {
          input: Buffer.from(
            '<svg xmlns="http://www.w3.org/2000/svg" width="2048" height="2048"><circle cx="1024" cy="1024" r="700" fill="#e0a040"/></svg>',
          ),
        },
      ])
      .png()
      .toBuffer();
    let editDone = false;
    const editing = fetch(`${baseURL}/images/edits`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'tiny-upscaler-heavy',
        prompt: 'x',
        image: gradient.toString('base64'),
        size: '4096x4096',
        output_format: 'png',
      }),
    }).then(async (response) => {
      editDone = true;
      return { status: response.status, body: (await response.json()) as { size: string } };
    });

    // Wait until the image lane has the edit's tiles in hand.
    while (server.images.active === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const embedding = await fetch(`${baseURL}/embeddings`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny-embedder', input: ['a text while an image is being upscaled'] }),
    });
    expect(embedding.status).toBe(200);
    expect(((await embedding.json()) as { data: unknown[] }).data).toHaveLength(1);
    // The text request finished first, and the image lane was still at work on the edit.
    expect(editDone).toBe(false);
    expect(server.imageEdits.running).toBe(1);

    const edited = await editing;
    expect(edited.status).toBe(200);
    expect(edited.body.size).toBe('4096x4096');
  });
});
