/**
 * What one image edit request may hold and ask for: only PNG, JPEG and WebP are decoded (others
 * 415), the answer is bounded before the edit runs (413 response_too_large), an edit takes its
 * place in line before any base64 is decoded (a full line refuses it with 429, whatever it holds),
 * and a form's files are refused the moment their running total passes the body limit, before
 * the client has sent them all.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from '../../src/main.js';
import { writeTinyImageModels } from '../fixtures/tiny-image-model.js';
import type { EditedImages, ErrorBody } from '../helpers/bodies.js';
import { auth, startServer, testKey } from '../helpers/server.js';

let server: Server;
let imageDir: string;
let port: number;
const bodyLimit = 1024 * 1024;

beforeAll(async () => {
  imageDir = await mkdtemp(join(tmpdir(), 'onnx-gateway-images-'));
  await writeTinyImageModels(imageDir);
  server = await startServer({
    imageModels: ['tiny-upscaler', 'tiny-upscaler-heavy'],
    imageModelsDir: imageDir,
    imageWorkers: 1,
    imageIntraOpThreads: 1,
    imageBodyLimit: bodyLimit,
    // One edit at a time and none waiting: a second edit meets a full line.
    imageConcurrency: 1,
    imageQueueCapacity: 0,
    // At most 512x512 pixels an image: one such image is about 1.4 MB of base64 at worst, over the 1 MB answer limit.
    imageMaxPixels: 512 * 512,
    maxResponseMb: 1,
  });
  const address = await server.app.listen({ port: 0, host: '127.0.0.1' });
  port = Number(new URL(address).port);
});

afterAll(async () => {
  await server?.close();
  await rm(imageDir, { recursive: true, force: true });
});

const edit = (payload: Record<string, unknown>) =>
  server.app.inject({ method: 'POST', url: '/v1/images/edits', headers: auth, payload });
const png = (width: number, height: number) =>
  sharp({ create: { width, height, channels: 3, background: '#336699' } })
    .png()
    .toBuffer();

describe('input formats', () => {
  it.each([
    [
      'GIF',
      () =>
        sharp({ create: { width: 8, height: 8, channels: 3, background: '#000' } })
          .gif()
          .toBuffer(),
    ],
    [
      'TIFF',
      () =>
        sharp({ create: { width: 8, height: 8, channels: 3, background: '#000' } })
          .tiff()
          .toBuffer(),
    ],
    [
      'SVG',
      () =>
        Promise.resolve(
          Buffer.from(
            '<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"><rect width="8" height="8"/></svg>',
          ),
        ),
    ],
  ])('refuses %s with 415 before decoding it', async (name, make) => {
    const res = await edit({
      model: 'tiny-upscaler',
      prompt: 'x',
      image: [(await png(8, 8)).toString('base64'), (await make()).toString('base64')],
    });
    expect(res.statusCode).toBe(415);
    expect(res.json<ErrorBody>().error).toMatchObject({ code: 'unsupported_media_type', param: 'image[1]' });
    expect(res.json<ErrorBody>().error.message).toBe(`image[1] is ${name}; send PNG, JPEG or WebP.`);
  });

  it('edits PNG, JPEG and WebP', async () => {
    const base = sharp({ create: { width: 8, height: 8, channels: 3, background: '#808080' } });
    for (const bytes of [
      await base.clone().png().toBuffer(),
      await base.clone().jpeg().toBuffer(),
      await base.clone().webp().toBuffer(),
    ]) {
      const res = await edit({ model: 'tiny-upscaler', prompt: 'x', image: bytes.toString('base64') });
      expect(res.statusCode).toBe(200);
      expect(res.json<EditedImages>().size).toBe('16x16');
    }
  });
});

describe('the answer', () => {
  it('is bounded before the edit runs: sixteen outputs of 256x256 could pass 1 MB', async () => {
    const image = (await png(128, 128)).toString('base64');
    const res = await edit({ model: 'tiny-upscaler', prompt: 'x', image: Array.from({ length: 16 }, () => image) });
    expect(res.statusCode).toBe(413);
    expect(res.json<ErrorBody>().error).toMatchObject({ code: 'response_too_large', param: 'image' });
    expect(res.json<ErrorBody>().error.message).toMatch(
      /MB of images \(16 png images of 1,048,576 pixels together, 256x256, .*\); .* Split the request: about \d+ of these inputs fit/,
    );
    // Two of them fit.
    expect((await edit({ model: 'tiny-upscaler', prompt: 'x', image: [image, image] })).statusCode).toBe(200);
  });

  it('may always hold one image at the largest size the limits allow', async () => {
    const res = await edit({
      model: 'tiny-upscaler',
      prompt: 'x',
      image: (await png(256, 256)).toString('base64'),
      size: '512x512',
    });
    expect(res.statusCode).toBe(200);
    expect(res.json<EditedImages>().size).toBe('512x512');
  });
});

/** An edit that keeps the one place busy for a while: the heavy model, tiled, at the largest size. */
async function busyEdit(): Promise<Response> {
  const image = await png(256, 256);
  return fetch(`http://127.0.0.1:${port}/v1/images/edits`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'tiny-upscaler-heavy',
      prompt: 'x',
      image: image.toString('base64'),
      size: '512x512',
    }),
  });
}

describe('admission', () => {
  it("takes an edit's place in line before decoding its base64: a full line refuses it, whatever it holds", async () => {
    const running = busyEdit();
    while (server.imageEdits.running === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    // Not base64 at all: decoded first, this would be a 400.
    const refused = await edit({ model: 'tiny-upscaler', prompt: 'x', image: '%%% not base64 %%%' });
    expect(refused.statusCode).toBe(429);
    expect(refused.json<ErrorBody>().error.code).toBe('overloaded');
    expect(refused.headers['retry-after']).toBeDefined();
    expect((await running).status).toBe(200);
    // With the place free, the same body is read, and refused for what it is.
    const bad = await edit({ model: 'tiny-upscaler', prompt: 'x', image: '%%% not base64 %%%' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json<ErrorBody>().error).toMatchObject({ code: 'invalid_image', param: 'image[0]' });
  });
});

describe('multipart forms', () => {
  it('are refused as soon as their files pass the body limit, before the rest arrives', async () => {
    const boundary = 'limit-test-boundary';
    const filePart = (name: string) =>
      `--${boundary}\r\nContent-Disposition: form-data; name="image[]"; filename="${name}"\r\nContent-Type: image/png\r\n\r\n`;
    const head = `--${boundary}\r\nContent-Disposition: form-data; name="prompt"\r\n\r\nx\r\n` + filePart('a.png');
    const declared = 4 * bodyLimit;
    const socket = connect(port, '127.0.0.1');
    const answer = new Promise<string>((resolve, reject) => {
      let text = '';
      socket.on('data', (chunk) => {
        text += chunk.toString('latin1');
        if (text.includes('\r\n\r\n') && text.includes('}')) resolve(text);
      });
      socket.on('error', reject);
    });
    socket.write(
      `POST /v1/images/edits HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${testKey}\r\n` +
        `Content-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${declared}\r\n\r\n` +
        head,
    );
    // The first file whole, then the start of a second that passes the limit; the form is never finished.
    socket.write(Buffer.alloc(bodyLimit / 2 + 1024, 1));
    socket.write(`\r\n${filePart('b.png')}`);
    socket.write(Buffer.alloc(bodyLimit / 2 + 64 * 1024, 2));
    const text = await answer;
    socket.destroy();
    expect(text).toMatch(/^HTTP\/1\.1 413/);
    expect(text).toMatch(/"code":"payload_too_large"/);
  }, 20_000);
});
