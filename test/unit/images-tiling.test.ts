import { describe, expect, it } from 'vitest';
import { imageTokens, imageUsage } from '../../src/images/accounting.js';
import { coverCrop } from '../../src/images/raster.js';
import { fitWithin, overlapFor, parseSize } from '../../src/images/options.js';
import { extractTile, spanWeights, tileSpans, TileBlender } from '../../src/images/tiling.js';

/** A deterministic pseudo-random image. */
function noise(width: number, height: number, channels: number, seed = 7): Uint8Array {
  const data = new Uint8Array(width * height * channels);
  let state = seed;
  for (let i = 0; i < data.length; i++) {
    state = (state * 1103515245 + 12345) >>> 0;
    data[i] = state >>> 24;
  }
  return data;
}

/** Runs a tiled "model" (nearest-neighbour x scale) through the blender. */
function tiledNearest(
  source: Uint8Array,
  width: number,
  height: number,
  channels: number,
  tile: number,
  overlap: number,
  scale: number,
  order: 'forward' | 'reverse',
) {
  const xs = tileSpans(width, tile, overlap, false);
  const ys = tileSpans(height, tile, overlap, false);
  const blender = new TileBlender(width * scale, height * scale, channels, xs, ys, scale);
  const tiles: [number, number][] = [];
  for (let j = 0; j < ys.length; j++) for (let i = 0; i < xs.length; i++) tiles.push([i, j]);
  if (order === 'reverse') tiles.reverse();
  for (const [i, j] of tiles) {
    const w = xs[i]!.end - xs[i]!.start;
    const h = ys[j]!.end - ys[j]!.start;
    const input = extractTile(source, width, height, channels, xs[i]!.start, ys[j]!.start, w, h);
    const output = new Float32Array(w * scale * h * scale * channels);
    for (let y = 0; y < h * scale; y++) {
      for (let x = 0; x < w * scale; x++) {
        for (let c = 0; c < channels; c++)
          output[(y * w * scale + x) * channels + c] =
            input[(Math.floor(y / scale) * w + Math.floor(x / scale)) * channels + c]!;
      }
    }
    blender.add(i, j, output);
  }
  return blender;
}

describe('tile spans', () => {
  it('cover the axis with full-size tiles that overlap by at least the overlap', () => {
    for (const length of [193, 300, 368, 383, 384, 1000, 3840]) {
      const spans = tileSpans(length, 192, 16, false);
      expect(spans[0]!.start).toBe(0);
      expect(spans.at(-1)!.end).toBe(length);
      for (const span of spans) expect(span.end - span.start).toBe(192);
      for (let i = 1; i < spans.length; i++) expect(spans[i - 1]!.end - spans[i]!.start).toBeGreaterThanOrEqual(16);
    }
  });

  it('give a short axis one span: its own length for dynamic models, a full tile for fixed ones', () => {
    expect(tileSpans(100, 192, 16, false)).toEqual([{ start: 0, end: 100 }]);
    expect(tileSpans(100, 224, 16, true)).toEqual([{ start: 0, end: 224 }]);
  });

  it('weights of neighbouring tiles sum to 1 across their overlap', () => {
    const spans = tileSpans(1000, 192, 32, false);
    const scale = 2;
    const sums = new Float32Array(1000 * scale);
    spans.forEach((span, i) => spanWeights(spans, i, scale).forEach((w, x) => (sums[span.start * scale + x]! += w)));
    for (const sum of sums) expect(sum).toBeCloseTo(1, 5);
  });
});

describe('tile blender', () => {
  it('reassembles a tiled x2 nearest-neighbour upscale exactly, in any tile order', () => {
    const [width, height, channels] = [301, 157, 3];
    const source = noise(width, height, channels);
    for (const order of ['forward', 'reverse'] as const) {
      const blender = tiledNearest(source, width, height, channels, 64, 12, 2, order);
      expect(blender.complete).toBe(true);
      for (const [x, y] of [
        [0, 0],
        [601, 313],
        [127, 64],
        [300, 200],
        [455, 99],
      ] as const) {
        for (let c = 0; c < channels; c++) {
          expect(blender.pixels[(y * width * 2 + x) * channels + c]).toBe(
            source[(Math.floor(y / 2) * width + Math.floor(x / 2)) * channels + c],
          );
        }
      }
      expect(Buffer.compare(Buffer.from(blender.pixels), Buffer.from(nearestX2(source, width, height, channels)))).toBe(
        0,
      );
    }
  });

  it('holds only a band of rows as floats when tiles arrive in order', () => {
    const [width, height] = [200, 1000];
    const blender = tiledNearest(noise(width, height, 1), width, height, 1, 64, 8, 2, 'forward');
    expect(blender.complete).toBe(true);
    // One tile row of output (64 x 2 rows) plus its overlap, not the 2000 rows of the image.
    expect(blender.peakRows).toBeLessThanOrEqual(128);
  });

  it('repeats edge pixels for tiles reaching past the image', () => {
    const source = Uint8Array.from([1, 2, 3, 4]);
    expect([...extractTile(source, 2, 2, 1, -1, 0, 4, 3)]).toEqual([1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4]);
  });
});

function nearestX2(source: Uint8Array, width: number, height: number, channels: number): Uint8Array {
  const out = new Uint8Array(width * 2 * height * 2 * channels);
  for (let y = 0; y < height * 2; y++) {
    for (let x = 0; x < width * 2; x++) {
      for (let c = 0; c < channels; c++)
        out[(y * width * 2 + x) * channels + c] = source[((y >> 1) * width + (x >> 1)) * channels + c]!;
    }
  }
  return out;
}

describe('sizes and accounting', () => {
  const limits = { maxEdge: 4096, maxPixels: 4096 * 4096 };

  it('parses sizes within the limits', () => {
    expect(parseSize('3840x2160', limits)).toEqual({ width: 3840, height: 2160 });
    expect(parseSize(undefined, limits)).toBe('auto');
    expect(() => parseSize('5000x100', limits)).toThrow(/longest edge/);
    expect(() => parseSize('4096x4096', { maxEdge: 4096, maxPixels: 1e6 })).toThrow(/pixels/);
    expect(() => parseSize('big', limits)).toThrow(/WIDTHxHEIGHT/);
  });

  it('fits auto sizes within the limits, keeping the aspect ratio', () => {
    expect(fitWithin({ width: 8000, height: 4000 }, limits)).toEqual({ width: 4096, height: 2048 });
    expect(fitWithin({ width: 1000, height: 500 }, limits)).toEqual({ width: 1000, height: 500 });
  });

  it('crops the centre to the target aspect ratio', () => {
    expect(coverCrop(960, 540, 1, 1)).toEqual({ left: 210, top: 0, width: 540, height: 540 });
    expect(coverCrop(1000, 1000, 3840, 2160)).toEqual({ left: 0, top: 218, width: 1000, height: 563 });
    expect(coverCrop(1920, 1080, 3840, 2160)).toEqual({ left: 0, top: 0, width: 1920, height: 1080 });
  });

  it('widens overlaps with quality, never past half a tile', () => {
    expect([overlapFor('low', 16, 192), overlapFor('medium', 16, 192), overlapFor('high', 16, 192)]).toEqual([
      8, 16, 32,
    ]);
    expect(overlapFor('high', 100, 128)).toBe(63);
  });

  it('counts one image token per started 64x64 tile', () => {
    expect(imageTokens({ width: 3840, height: 2160 })).toBe(60 * 34);
    expect(imageTokens({ width: 65, height: 1 })).toBe(2);
    const usage = imageUsage(12, [{ width: 512, height: 512 }], [{ width: 2048, height: 2048 }]);
    expect(usage).toEqual({
      input_tokens: 64 + 12,
      input_tokens_details: { image_tokens: 64, text_tokens: 12 },
      output_tokens: 1024,
      output_tokens_details: { image_tokens: 1024, text_tokens: 0 },
      total_tokens: 64 + 12 + 1024,
    });
  });
});
