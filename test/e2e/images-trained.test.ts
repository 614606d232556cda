/**
 * Image edits with the real trained models: exact 2K and 4K sizes, super-resolution that stays
 * true to its input, and a background-removal matte that finds the subject.
 *
 * Needs the trained image models (`<id>/onnx/model.onnx`) in ONNX_GATEWAY_IMAGE_MODELS_DIR
 * (default .data/models); the tests skip without them.
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from '../../src/main.js';
import type { EditedImages } from '../helpers/bodies.js';
import { auth, startServer } from '../helpers/server.js';
import { missing } from '../helpers/resources.js';

const dir = resolve(process.env.ONNX_GATEWAY_IMAGE_MODELS_DIR ?? '.data/models');
const wanted = ['realesr-animevideov3', 'espcn-superres-x3-y', 'isnet-imgly-small', 'fast-neural-style-candy-nc16'];
const present = wanted.filter((id) => existsSync(join(dir, id, 'onnx', 'model.onnx')));
const hint = `needs the trained image models ${wanted.join(', ')} in ${dir}: set ONNX_GATEWAY_IMAGE_MODELS_DIR=../shared/models/trained (or link its folders into .data/models)`;
const has = (id: string) => !missing(present.includes(id), hint);
const slow = 600_000;

let server: Server;

beforeAll(async () => {
  if (present.length === 0) return;
  server = await startServer({ imageModels: present, imageModelsDir: dir, imageWorkers: 1 });
}, slow);

afterAll(async () => {
  await server?.close();
});

/** A synthetic picture: a gradient sky, shapes with edges, and text. */
function picture(width: number, height: number): Promise<Buffer> {
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 256 256" preserveAspectRatio="none">
    <defs><linearGradient id="g" x2="1" y2="1"><stop offset="0" stop-color="#204080"/><stop offset="1" stop-color="#f0d0a0"/></linearGradient></defs>
    <rect width="256" height="256" fill="url(#g)"/><circle cx="100" cy="120" r="60" fill="#c03030"/>
    <rect x="150" y="30" width="80" height="50" fill="#30a040"/><text x="20" y="230" font-size="28" fill="white">Sample 42</text></svg>`;
  return sharp(Buffer.from(svg)).png().toBuffer();
}

async function edit(payload: Record<string, unknown>) {
  const response = await server.app.inject({ method: 'POST', url: '/v1/images/edits', headers: auth, payload });
  expect(response.statusCode, response.body.slice(0, 300)).toBe(200);
  const body = response.json<EditedImages>();
  const bytes = Buffer.from(body.data[0]!.b64_json!, 'base64');
  const { data, info } = await sharp(bytes).raw().toBuffer({ resolveWithObject: true });
  return { body, bytes, data, info };
}

function psnr(a: Uint8Array, b: Uint8Array): number {
  let squared = 0;
  for (let i = 0; i < a.length; i++) squared += (a[i]! - b[i]!) ** 2;
  return 10 * Math.log10((255 * 255) / (squared / a.length));
}

describe.skipIf(!has('realesr-animevideov3'))(
  `super-resolution with realesr-animevideov3 (${has('realesr-animevideov3') ? 'present' : hint})`,
  () => {
    it.each([
      ['2048x2048', 512, 512],
      ['3840x2160', 960, 540],
    ])(
      'makes exactly %s',
      async (size, width, height) => {
        const { body, info } = await edit({
          model: 'realesr-animevideov3',
          prompt: 'upscale',
          image: (await picture(width, height)).toString('base64'),
          size,
        });
        expect(body.size).toBe(size);
        expect(`${info.width}x${info.height}`).toBe(size);
        expect(body.data[0]!.revised_prompt).toMatch(/1 pass/);
      },
      slow,
    );

    it(
      'stays true to its input: downscaled back, PSNR >= 30 dB against the input',
      async () => {
        const input = await picture(256, 256);
        const { body, bytes } = await edit({
          model: 'realesr-animevideov3',
          prompt: 'upscale',
          image: input.toString('base64'),
        });
        expect(body.size).toBe('1024x1024');
        const back = await sharp(bytes).resize(256, 256, { kernel: 'lanczos3' }).removeAlpha().raw().toBuffer();
        const original = await sharp(input).removeAlpha().raw().toBuffer();
        expect(psnr(original, back)).toBeGreaterThanOrEqual(30);
      },
      slow,
    );
  },
);

describe.skipIf(!has('espcn-superres-x3-y'))(
  `super-resolution with espcn-superres-x3-y (${has('espcn-superres-x3-y') ? 'present' : hint})`,
  () => {
    it(
      'makes exactly 2048x2048 from fixed 224x224 luma tiles, true to its input',
      async () => {
        const input = await picture(683, 683);
        const { body, bytes } = await edit({
          model: 'espcn-superres-x3-y',
          prompt: 'upscale',
          image: input.toString('base64'),
          size: '2048x2048',
        });
        expect(body.size).toBe('2048x2048');
        const back = await sharp(bytes).resize(683, 683, { kernel: 'lanczos3' }).removeAlpha().raw().toBuffer();
        expect(psnr(await sharp(input).removeAlpha().raw().toBuffer(), back)).toBeGreaterThanOrEqual(30);
      },
      slow,
    );
  },
);

describe.skipIf(!has('isnet-imgly-small'))(
  `background removal with isnet-imgly-small (${has('isnet-imgly-small') ? 'present' : hint})`,
  () => {
    it(
      'gives alpha near 1 on the subject and near 0 at the border',
      async () => {
        // A mug on a plain, lightly noisy background (a perfectly flat one is unlike any photo).
        const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="640" height="480"><rect width="100%" height="100%" fill="#f4f4f4"/>
      <rect x="220" y="140" width="180" height="230" rx="18" fill="#2060c0"/><path d="M400 190 q80 0 80 70 q0 70 -80 70" stroke="#2060c0" stroke-width="26" fill="none"/>
      <ellipse cx="310" cy="140" rx="90" ry="16" fill="#1a4a90"/></svg>`;
        const { data: clean, info: size } = await sharp(Buffer.from(svg))
          .removeAlpha()
          .raw()
          .toBuffer({ resolveWithObject: true });
        let state = 1;
        const noisy = clean.map((v) => {
          state = (state * 1103515245 + 12345) >>> 0;
          return Math.max(0, Math.min(255, v + Math.round(((state >>> 24) / 255 - 0.5) * 12)));
        });
        const input = await sharp(noisy, { raw: { width: size.width, height: size.height, channels: 3 } })
          .png()
          .toBuffer();
        const { body, data, info } = await edit({
          model: 'isnet-imgly-small',
          prompt: 'remove the background',
          image: input.toString('base64'),
        });
        expect(body.background).toBe('transparent');
        expect([info.width, info.height, info.channels]).toEqual([640, 480, 4]);
        const alpha = (x: number, y: number) => data[(y * 640 + x) * 4 + 3]!;
        for (const [x, y] of [
          [310, 250],
          [240, 200],
          [380, 340],
          [478, 260],
        ])
          expect(alpha(x!, y!)).toBeGreaterThan(0.95 * 255);
        const border: number[] = [];
        for (let y = 0; y < 480; y++)
          for (let x = 0; x < 640; x++) if (x < 16 || y < 16 || x >= 624 || y >= 464) border.push(alpha(x, y));
        border.sort((a, b) => a - b);
        expect(border.reduce((a, b) => a + b, 0) / border.length).toBeLessThan(0.03 * 255);
        expect(border[Math.floor(border.length * 0.95)]).toBeLessThan(0.1 * 255);
      },
      slow,
    );

    it(
      'makes exactly 3840x2160',
      async () => {
        const { body, info } = await edit({
          model: 'isnet-imgly-small',
          prompt: 'x',
          image: (await picture(960, 540)).toString('base64'),
          size: '3840x2160',
        });
        expect(body.size).toBe('3840x2160');
        expect([info.width, info.height, info.channels]).toEqual([3840, 2160, 4]);
      },
      slow,
    );
  },
);

describe.skipIf(!has('fast-neural-style-candy-nc16'))(
  `style transfer with fast-neural-style-candy-nc16 (${has('fast-neural-style-candy-nc16') ? 'present' : hint})`,
  () => {
    it(
      'restyles visibly and makes exactly 3840x2160',
      async () => {
        const input = await picture(640, 360);
        const { body, bytes, info } = await edit({
          prompt: 'in the candy style',
          image: input.toString('base64'),
          size: '3840x2160',
        });
        expect(body.size).toBe('3840x2160');
        expect([info.width, info.height]).toEqual([3840, 2160]);
        const back = await sharp(bytes).resize(640, 360).removeAlpha().raw().toBuffer();
        const original = await sharp(input).removeAlpha().raw().toBuffer();
        let difference = 0;
        for (let i = 0; i < back.length; i++) difference += Math.abs(back[i]! - original[i]!);
        expect(difference / back.length).toBeGreaterThan(20);
      },
      slow,
    );
  },
);
