/**
 * Image preprocessing against Pillow itself: test/fixtures/pillow_reference.py (Debian's python3
 * with python3-pil and numpy) writes test images of many sizes and kinds, the RGB bytes
 * transformers' load_image gives for each, Pillow's resizes of those bytes with every filter, and
 * the pixel_values of CLIP, SigLIP and jina-clip processors computed as transformers and open_clip
 * compute them. Decoding and resizing must give the same bytes (difference 0), pixel_values the
 * same floats within 1e-6.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { crc32, deflateSync } from 'node:zlib';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { ImagePreprocessPool } from '../../src/engine/image-preprocess-pool.js';
import { readImageProcessor, type Resample } from '../../src/models/image-processor.js';
import {
  decodeRgb,
  ImageDecodeError,
  preprocessInto,
  resizeRgb,
  type RgbImage,
} from '../../src/worker/image-preprocess/index.js';
import { pngOrientation } from '../../src/worker/image-preprocess/png-orientation.js';
import { decodePng } from '../../src/worker/image-preprocess/png.js';
import { referenceProcessors } from '../fixtures/preprocessor-configs.js';
import { madeOnce } from '../helpers/made-once.js';

const PYTHON = '/usr/bin/python3';
const script = fileURLToPath(new URL('../fixtures/pillow_reference.py', import.meta.url));
const MAX_PIXELS = 40_000_000;

interface Case {
  name: string;
  width: number;
  height: number;
  decoded: string;
  resizes: { filter: Resample; width: number; height: number; file: string }[];
  pixel_values: Record<keyof typeof referenceProcessors, { file: string; height: number; width: number }>;
}

let dir: string;
let cases: Case[];

beforeAll(async () => {
  // CI installs python3-pil: without it these tests fail rather than skip.
  const probe = spawnSync(PYTHON, ['-c', 'import PIL, numpy; print(PIL.__version__, numpy.__version__)'], {
    encoding: 'utf8',
  });
  if (probe.status !== 0)
    throw new Error(
      `${PYTHON} cannot import PIL and numpy, which the reference pixels come from: ` +
        `apt-get install python3-pil python3-numpy (${(probe.stderr || String(probe.error)).trim()})`,
    );
  // Made once per version of the script, Pillow and numpy.
  dir = await madeOnce({ name: 'pillow-reference', sources: [script], versions: probe.stdout }, (out) => {
    const run = spawnSync(PYTHON, [script, '--out', out], { encoding: 'utf8' });
    if (run.status !== 0) throw new Error(`pillow_reference.py failed: ${run.stderr}`);
  });
  cases = (JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as { cases: Case[] }).cases;
}, 300_000);

const bytesOf = (file: string) => new Uint8Array(readFileSync(join(dir, file)));

/** The largest absolute difference, and where, between two equally long arrays. */
function maxDifference(a: ArrayLike<number>, b: ArrayLike<number>): { max: number; at: number } {
  let max = 0;
  let at = -1;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i]! - b[i]!);
    if (d > max || Number.isNaN(d)) {
      max = Number.isNaN(d) ? Infinity : d;
      at = i;
    }
  }
  return { max, at };
}

describe('decodeRgb', () => {
  it('gives the bytes of Pillow: exif_transpose, then convert("RGB")', async () => {
    const wrong: string[] = [];
    for (const c of cases) {
      const image = await decodeRgb(bytesOf(c.name), MAX_PIXELS);
      const expected = bytesOf(c.decoded);
      if (image.width !== c.width || image.height !== c.height) {
        wrong.push(`${c.name}: ${image.width}x${image.height}, Pillow ${c.width}x${c.height}`);
        continue;
      }
      const { max, at } = maxDifference(image.data, expected);
      if (max !== 0) wrong.push(`${c.name}: differs by ${max} at byte ${at}`);
    }
    expect(wrong).toEqual([]);
    // Every kind the script makes is here (EXIF orientations, alpha, gray, palette, 16-bit, CMYK, WebP).
    expect(cases.length).toBeGreaterThanOrEqual(76);
  });

  it('applies every EXIF orientation (2..8 differ from the stored pixels)', async () => {
    const stored = await decodeRgb(bytesOf('exif-1-40x24.jpg'), MAX_PIXELS);
    for (let orientation = 2; orientation <= 8; orientation++) {
      const image = await decodeRgb(bytesOf(`exif-${orientation}-40x24.jpg`), MAX_PIXELS);
      expect([image.width, image.height]).toEqual(orientation >= 5 ? [24, 40] : [40, 24]);
      expect(Buffer.from(image.data).equals(Buffer.from(stored.data))).toBe(false);
    }
  });

  it('decodes the common PNGs itself and leaves the others to sharp', () => {
    for (const name of ['rgb-301x199.png', 'rgba-97x61.png', 'la-50x70.png', 'gray-123x77.png', 'palette-90x60.png'])
      expect(decodePng(bytesOf(name), MAX_PIXELS), name).toBeDefined();
    for (const name of ['gray16-33x21.png', 'rgb16-33x21.png', 'bilevel-40x30.png'])
      expect(decodePng(bytesOf(name), MAX_PIXELS), name).toBeUndefined();
    const png = bytesOf('rgb-301x199.png');
    expect(decodePng(png, 1000)).toBeUndefined();
    const damaged = png.slice();
    damaged[40] = damaged[40]! ^ 0xff;
    expect(decodePng(damaged, MAX_PIXELS)).toBeUndefined();
  });

  it('refuses what is not an image, or is cut short, or is too large, with an ImageDecodeError', async () => {
    const png = bytesOf('rgb-301x199.png');
    await expect(decodeRgb(new Uint8Array(0), MAX_PIXELS)).rejects.toThrow(ImageDecodeError);
    await expect(decodeRgb(new TextEncoder().encode('GIF89a not really'), MAX_PIXELS)).rejects.toThrow(
      /not PNG, JPEG or WebP/,
    );
    await expect(decodeRgb(png.subarray(0, 200), MAX_PIXELS)).rejects.toThrow(ImageDecodeError);
    await expect(decodeRgb(bytesOf('photo-1920x1080.jpg').subarray(0, 5000), MAX_PIXELS)).rejects.toThrow(
      ImageDecodeError,
    );
    await expect(decodeRgb(png, 1000)).rejects.toThrow(/can not be decoded.*pixel limit/i);
  });
});

/** A PNG chunk: length, type, body and checksum. */
function chunk(type: string, body: Uint8Array | string): Buffer {
  const data = Buffer.concat([Buffer.from(type, 'latin1'), Buffer.from(body)]);
  const out = Buffer.alloc(data.length + 8);
  out.writeUInt32BE(data.length - 4, 0);
  data.copy(out, 4);
  out.writeUInt32BE(crc32(data), data.length + 4);
  return out;
}

/** `png` with chunks put just before its first IDAT and just after its last (a single one here). */
function withChunks(png: Uint8Array, before: Buffer[], after: Buffer[] = []): Uint8Array {
  const bytes = Buffer.from(png);
  const idat = bytes.indexOf('IDAT') - 4;
  const end = idat + 12 + bytes.readUInt32BE(idat);
  return Buffer.concat([bytes.subarray(0, idat), ...before, bytes.subarray(idat, end), ...after, bytes.subarray(end)]);
}

const xmp = (orientation: string) => chunk('iTXt', `XML:com.adobe.xmp\0\0\0\0\0<rdf:Description ${orientation}/>`);
/** A little-endian EXIF block whose first IFD holds an orientation (SHORT). */
const exifBlock = (orientation: number) =>
  Buffer.from(
    `4578696600004949 2a00 08000000 0100 1201 0300 01000000 ${orientation.toString(16).padStart(2, '0')}000000 00000000`.replace(
      / /g,
      '',
    ),
    'hex',
  );
const rawProfile = (hex: string) =>
  chunk('tEXt', `Raw profile type exif\0\nexif\n${String(hex.length / 2).padStart(8)}\n${hex}\n`);

describe('pngOrientation', () => {
  it('reads the PNGs Pillow refuses to read, and whatever their chunks hold, without throwing', () => {
    const png = bytesOf('rgb-17x11.png');
    const orientation = (before: Buffer[], after: Buffer[] = []) => pngOrientation(withChunks(png, before, after));
    expect(orientation([rawProfile(exifBlock(6).toString('hex'))])).toBe(6);
    // EXIF Pillow cannot parse (hex that is not hex, no TIFF header, BigTIFF, a zTXt "exif"): as if absent, XMP decides.
    expect(orientation([rawProfile('zz' + exifBlock(6).toString('hex')), xmp('tiff:Orientation="8"')])).toBe(8);
    expect(
      orientation([rawProfile(Buffer.from('Exif\0\0garbage!!').toString('hex')), xmp('tiff:Orientation="8"')]),
    ).toBe(8);
    expect(orientation([rawProfile('49492b0008000000' + '00'.repeat(16)), xmp('tiff:Orientation="7"')])).toBe(7);
    expect(
      orientation([
        chunk('zTXt', Buffer.concat([Buffer.from('exif\0\0'), deflateSync('text')])),
        xmp('tiff:Orientation="5"'),
      ]),
    ).toBe(5);
    // XMP as Pillow's regular expression reads it: one digit after =" or >, the first such; 2..8 turn.
    expect(orientation([xmp(`tiff:Orientation='6' tiff:Orientation="3"`)])).toBe(3);
    expect(orientation([xmp('tiff:Orientation="16"')])).toBe(1);
    expect(orientation([xmp('tiff:Orientation = "6"')])).toBe(1);
    // A checksum that is wrong before the image data (Pillow refuses the file): the chunk is ignored; after it, Pillow reads it.
    const badSum = xmp('tiff:Orientation="8"');
    badSum[badSum.length - 1]! ^= 0xff;
    expect(orientation([badSum])).toBe(1);
    expect(orientation([], [badSum])).toBe(8);
    // Past Pillow's limit of 1 MB a zTXt is refused: ignored, the raw profile before it stands.
    const bomb = Buffer.concat([Buffer.from('Raw profile type exif\0\0'), deflateSync(Buffer.alloc(2 << 20, 0x20))]);
    expect(orientation([rawProfile(exifBlock(6).toString('hex')), chunk('zTXt', bomb)])).toBe(6);
    // A key of megabytes, a chunk running past the end of the file, a file of nothing but a signature.
    expect(orientation([chunk('tEXt', Buffer.alloc(2 << 20, 0x41))])).toBe(1);
    const cut = withChunks(png, [xmp('tiff:Orientation="6"')]);
    expect(pngOrientation(cut.subarray(0, 60))).toBe(1);
    expect(pngOrientation(png.subarray(0, 8))).toBe(1);
  });

  it('decodes a PNG with such chunks to its upright pixels, or refuses it with an ImageDecodeError', async () => {
    const png = bytesOf('rgb-17x11.png');
    const upright = await decodeRgb(withChunks(png, [xmp('tiff:Orientation="6"')]), MAX_PIXELS);
    expect([upright.width, upright.height]).toEqual([11, 17]);
    const bomb = Buffer.concat([Buffer.from('XML:com.adobe.xmp\0\0'), deflateSync(Buffer.alloc(2 << 20, 0x20))]);
    const stored = await decodeRgb(withChunks(png, [chunk('zTXt', bomb)]), MAX_PIXELS);
    expect([stored.width, stored.height]).toEqual([17, 11]);
    const cut = withChunks(png, [xmp('tiff:Orientation="6"')]);
    await expect(decodeRgb(cut.subarray(0, cut.length - 40), MAX_PIXELS)).rejects.toThrow(ImageDecodeError);
  });
});

describe('resizeRgb', () => {
  it.each(['simd', 'scalar'] as const)(
    "gives Pillow's bytes for every filter, size and direction (%s passes)",
    (kernels) => {
      const wrong: string[] = [];
      let compared = 0;
      for (const c of cases) {
        const source: RgbImage = { data: bytesOf(c.decoded), width: c.width, height: c.height };
        for (const r of c.resizes) {
          const resized = resizeRgb(source, r.width, r.height, r.filter, kernels);
          const { max, at } = maxDifference(resized.data, bytesOf(r.file));
          if (max !== 0) wrong.push(`${c.name} ${r.filter} ${r.width}x${r.height}: differs by ${max} at byte ${at}`);
          compared++;
        }
      }
      expect(wrong).toEqual([]);
      expect(compared).toBeGreaterThan(1000);
    },
  );

  it("gives the scalar passes' bytes for an image too large for the kept kernel memory", () => {
    // 3000 x 2000 RGB is 18 MB: the SIMD passes run in a memory of their own, dropped after.
    const width = 3000;
    const height = 2000;
    const data = new Uint8Array(width * height * 3);
    let seed = 12345;
    for (let i = 0; i < data.length; i++) {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      data[i] = ((i % 7919) + (seed >>> 24)) & 255;
    }
    const image: RgbImage = { data, width, height };
    for (const [w, h] of [
      [299, 201],
      [3000, 1000],
      [1000, 2000],
    ] as const) {
      const simd = resizeRgb(image, w, h, 'bicubic', 'simd');
      const scalar = resizeRgb(image, w, h, 'bicubic', 'scalar');
      expect(maxDifference(simd.data, scalar.data).max).toBe(0);
    }
  });

  it('refuses sizes Pillow refuses', () => {
    const image = { data: new Uint8Array(12), width: 2, height: 2 };
    expect(() => resizeRgb(image, 0, 3, 'bicubic')).toThrow(RangeError);
    expect(() => resizeRgb({ ...image, data: new Uint8Array(5) }, 3, 3, 'bicubic')).toThrow(RangeError);
  });
});

describe('preprocessInto', () => {
  it.each(Object.keys(referenceProcessors) as (keyof typeof referenceProcessors)[])(
    "writes %s's pixel_values as transformers computes them",
    async (processor) => {
      const spec = readImageProcessor(referenceProcessors[processor]);
      const plane = spec.width * spec.height;
      const wrong: string[] = [];
      let worst = 0;
      for (const c of cases) {
        const expected = new Float32Array(bytesOf(c.pixel_values[processor].file).buffer);
        expect([c.pixel_values[processor].height, c.pixel_values[processor].width]).toEqual([spec.height, spec.width]);
        // Written at an offset into a larger batch, as the runner does.
        const out = new Float32Array(3 * plane + 5).fill(Number.NaN);
        await preprocessInto(bytesOf(c.name), spec, out, 5, MAX_PIXELS);
        const { max, at } = maxDifference(out.subarray(5), expected);
        worst = Math.max(worst, max);
        if (max > 1e-6) wrong.push(`${c.name}: differs by ${max} at ${at}`);
      }
      expect(wrong).toEqual([]);
      expect(worst).toBeLessThanOrEqual(1e-6);
    },
  );

  it('refuses an output that does not fit', async () => {
    const spec = readImageProcessor(referenceProcessors.clip);
    const out = new Float32Array(3 * 224 * 224);
    await expect(preprocessInto(bytesOf('tiny-2x3.png'), spec, out, 1, MAX_PIXELS)).rejects.toThrow(RangeError);
  });

  it('runs on the preprocessing threads, a batch side by side: each row as here, a broken image failing its row only', async () => {
    const spec = readImageProcessor(referenceProcessors.siglip);
    const pool = new ImagePreprocessPool(3);
    try {
      const photo = cases.find((x) => x.name === 'photo-1920x1080.jpg')!;
      const named = [photo, ...cases.filter((x) => x !== photo).slice(0, 5)];
      const images = [...named.map((c) => bytesOf(c.name)), bytesOf(photo.name).subarray(0, 100).slice()];
      const vision = { processor: spec, pixelType: 'float32' as const, height: spec.height, width: spec.width };
      const batch = await pool.run(images, vision, MAX_PIXELS);
      const per = 3 * spec.height * spec.width;
      expect(batch.pixels.length).toBe(images.length * per);
      for (const [row, c] of named.entries()) {
        const expected = new Float32Array(bytesOf(c.pixel_values.siglip.file).buffer);
        expect(
          maxDifference(batch.pixels.subarray(row * per, (row + 1) * per), expected).max,
          c.name,
        ).toBeLessThanOrEqual(1e-6);
      }
      const broken = named.length;
      expect(Object.keys(batch.rowErrors ?? {})).toEqual([String(broken)]);
      expect(batch.rowErrors![broken]).toMatch(/^the image can not be decoded \(/);
      expect(batch.pixels.subarray(broken * per).every((value) => value === 0)).toBe(true);
      // Handed over to the threads, not copied.
      expect(images.every((image) => image.length === 0)).toBe(true);
      expect(batch.preprocess.ms).toBeGreaterThan(0);
    } finally {
      await pool.close();
    }
  });
});
