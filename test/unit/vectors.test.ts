import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  applyBeforeCut,
  calibrationRanges,
  clsPool,
  cosine,
  cutDimensions,
  packSignBits,
  quantize,
  quantizedWidth,
  float32ToBase64,
  float32ToJson,
  l2NormalizeRows,
  layerNormRows,
  meanPool,
  pool,
  sigmoid,
} from '../../src/vectors/index.js';
import { missing } from '../helpers/resources.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const modelsDir = resolve(root, process.env.ONNX_GATEWAY_MODELS_DIR ?? '.data/models');
const TOLERANCE = 1e-4;

function modelSuite(model: string): { title: string; missing: boolean } {
  const hint = `${model} not in ${modelsDir}: generate with: python3 ../shared/models/synthetic/make_models.py --out .data/models`;
  const absent = missing(existsSync(resolve(modelsDir, model, 'golden.json')), hint);
  return { title: absent ? `${model} (skipped: ${hint})` : model, missing: absent };
}

function expectClose(actual: ArrayLike<number>, expected: ArrayLike<number>, tolerance = TOLERANCE): void {
  expect(actual.length).toBe(expected.length);
  let worst = 0;
  for (let i = 0; i < expected.length; i++) worst = Math.max(worst, Math.abs(actual[i]! - expected[i]!));
  expect(worst).toBeLessThanOrEqual(tolerance);
}

interface EmbedderGolden {
  items: { mean_pooled: number[]; normalized: number[]; normalized_128: number[]; normalized_64: number[] }[];
  last_hidden_state_example: { item_index: number; shape: [number, number]; values: number[][] };
}
interface RerankerGolden {
  items: { logit: number; score: number }[];
}

const embedder = modelSuite('synthetic-all-MiniLM-L6-v2');
describe.skipIf(embedder.missing)(`vectors against golden ${embedder.title}`, () => {
  const g = embedder.missing
    ? undefined!
    : (JSON.parse(
        readFileSync(resolve(modelsDir, 'synthetic-all-MiniLM-L6-v2', 'golden.json'), 'utf8'),
      ) as EmbedderGolden);
  const dim = 384;

  it('meanPool of last_hidden_state_example gives mean_pooled, padding or not', () => {
    const { item_index, shape, values } = g.last_hidden_state_example;
    const [tokens, width] = shape;
    expect(width).toBe(dim);
    expect(values).toHaveLength(tokens);
    const hidden = Float32Array.from(values.flat());
    const expected = g.items[item_index]!.mean_pooled;
    expectClose(meanPool(hidden, [tokens], tokens, dim), expected);

    // Two rows right-padded to 16 tokens; the padding holds garbage that must not count.
    const seqLen = 16;
    const padded = new Float32Array(2 * seqLen * dim).fill(1e6);
    padded.set(hidden, 0);
    padded.set(hidden.subarray(0, 3 * dim), seqLen * dim);
    const pooled = meanPool(padded, [tokens, 3], seqLen, dim);
    expectClose(pooled.subarray(0, dim), expected);
    const firstThree = new Float32Array(dim);
    for (let t = 0; t < 3; t++) for (let d = 0; d < dim; d++) firstThree[d]! += hidden[t * dim + d]! / 3;
    expectClose(pooled.subarray(dim), firstThree, 1e-6);
  });

  it('l2NormalizeRows and cutDimensions give normalized, normalized_128 and normalized_64', () => {
    const rows = Float32Array.from(g.items.flatMap((item) => item.mean_pooled));
    expect(l2NormalizeRows(rows, dim)).toBe(rows);
    expectClose(
      rows,
      g.items.flatMap((item) => item.normalized),
    );
    expectClose(
      cutDimensions(rows, dim, 128),
      g.items.flatMap((item) => item.normalized_128),
    );
    expectClose(
      cutDimensions(rows, dim, 64),
      g.items.flatMap((item) => item.normalized_64),
    );
    expect(cutDimensions(rows, dim, dim)).toEqual(rows);
  });
});

const reranker = modelSuite('synthetic-ms-marco-MiniLM-L-6-v2');
describe.skipIf(reranker.missing)(`sigmoid against golden ${reranker.title}`, () => {
  it('turns logits into the golden scores', () => {
    const g = JSON.parse(
      readFileSync(resolve(modelsDir, 'synthetic-ms-marco-MiniLM-L-6-v2', 'golden.json'), 'utf8'),
    ) as RerankerGolden;
    for (const item of g.items) expect(Math.abs(sigmoid(item.logit) - item.score)).toBeLessThan(1e-6);
  });
});

describe('pooling', () => {
  it('meanPool weights only the first lengths[i] tokens; an empty row is zero', () => {
    // 2 rows x 3 tokens x 2 dims
    const hidden = Float32Array.from([1, 2, 3, 4, 100, 100, 5, 6, 100, 100, 100, 100]);
    expect(Array.from(meanPool(hidden, [2, 1], 3, 2))).toEqual([2, 3, 5, 6]);
    expect(Array.from(meanPool(hidden, [0, 3], 3, 2))).toEqual([0, 0, 205 / 3, 206 / 3].map(Math.fround));
  });

  it('clsPool takes the first token of each row', () => {
    const hidden = Float32Array.from([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(Array.from(clsPool(hidden, 2, 2, 2))).toEqual([1, 2, 5, 6]);
  });

  it("max, last-token, weighted-mean and mean/sqrt(len) pooling see only each row's real tokens", () => {
    // 2 rows x 3 tokens x 2 dims; row 0 has 2 real tokens, row 1 has 3.
    const hidden = Float32Array.from([1, 8, 3, 4, 100, 100, 5, 6, -1, 9, 2, -7]);
    const lengths = [2, 3];
    expect(Array.from(pool('max', hidden, lengths, 3, 2))).toEqual([3, 8, 5, 9]);
    expect(Array.from(pool('lasttoken', hidden, lengths, 3, 2))).toEqual([3, 4, 2, -7]);
    // weights 1, 2, 3 over the positions, divided by their sum.
    expect(Array.from(pool('weightedmean', hidden, lengths, 3, 2))).toEqual(
      [(1 + 6) / 3, (8 + 8) / 3, (5 - 2 + 6) / 6, (6 + 18 - 21) / 6].map(Math.fround),
    );
    expect(Array.from(pool('mean_sqrt_len', hidden, lengths, 3, 2))).toEqual(
      [4 / Math.SQRT2, 12 / Math.SQRT2, 6 / Math.sqrt(3), 8 / Math.sqrt(3)].map(Math.fround),
    );
    expect(Array.from(pool('mean', hidden, [0, 1], 3, 2))).toEqual([0, 0, 5, 6]);
    expect(Array.from(pool('lasttoken', hidden, [0, 1], 3, 2))).toEqual([0, 0, 5, 6]);
  });

  it('rejects shapes that do not match', () => {
    expect(() => pool('max', new Float32Array(12), [4, 1], 3, 2)).toThrow(RangeError);
    expect(() => meanPool(new Float32Array(10), [2], 3, 2)).toThrow(RangeError);
    expect(() => meanPool(new Float32Array(6), [4], 3, 2)).toThrow(RangeError);
    expect(() => clsPool(new Float32Array(7), 2, 2, 2)).toThrow(RangeError);
  });
});

describe('normalize', () => {
  it('keeps zero rows zero and scales others to unit length', () => {
    const rows = Float32Array.from([3, 4, 0, 0, -1e-20, 0]);
    l2NormalizeRows(rows, 2);
    expect(Array.from(rows)).toEqual([
      Math.fround(0.6),
      Math.fround(0.8),
      0,
      0,
      Math.fround(Math.fround(-1e-20) / 1e-12),
      0,
    ]);
  });

  it('cutDimensions keeps the first components, renormalised, in a new matrix', () => {
    const rows = Float32Array.from([3, 4, 12, 0, 0, 5]);
    const cut = cutDimensions(rows, 3, 2);
    expect(Array.from(cut)).toEqual([0.6, 0.8, 0, 0].map(Math.fround));
    expect(Array.from(rows)).toEqual([3, 4, 12, 0, 0, 5]);
    expect(() => cutDimensions(rows, 3, 4)).toThrow(RangeError);
    expect(() => cutDimensions(rows, 3, 0)).toThrow(RangeError);
    expect(() => l2NormalizeRows(rows, 4)).toThrow(RangeError);
  });

  it("layerNormRows centres each row and scales it to unit variance, as torch's layer_norm without weight and bias", () => {
    // Row 1: mean 2.5, biased variance 1.25; row 2 is constant: its variance is epsilon's alone.
    const rows = Float32Array.from([1, 2, 3, 4, 5, 5, 5, 5]);
    expect(layerNormRows(rows, 4, 1e-5)).toBe(rows);
    const scale = 1 / Math.sqrt(1.25 + 1e-5);
    expect(Array.from(rows)).toEqual([-1.5, -0.5, 0.5, 1.5, 0, 0, 0, 0].map((x) => Math.fround(x * scale)));
    const exact = layerNormRows(Float32Array.from([1, 2, 3, 4]), 4, 0);
    expect(Array.from(exact)).toEqual([-1.5, -0.5, 0.5, 1.5].map((x) => Math.fround(x / Math.sqrt(1.25))));
    expect(() => layerNormRows(rows, 3, 1e-5)).toThrow(RangeError);
    expect(() => layerNormRows(rows, 4, -1)).toThrow(RangeError);
    expect(() => layerNormRows(rows, 4, Number.NaN)).toThrow(RangeError);
  });

  it("a layer-norm step before the cut gives the card's Matryoshka vector, not the plain cut's", () => {
    // Layer-normed, [1, 2, 3, 4] is proportional to [-3, -1, 1, 3]: its first two, normalised, are
    // [-3, -1] / sqrt(10), where the plain cut gives [1, 2] / sqrt(5).
    const rows = Float32Array.from([1, 2, 3, 4]);
    expect(Array.from(cutDimensions(rows, 4, 2))).toEqual([1 / Math.sqrt(5), 2 / Math.sqrt(5)].map(Math.fround));
    const cut = cutDimensions(applyBeforeCut(rows, 4, { step: 'layer-norm', epsilon: 1e-5 }), 4, 2);
    expect(cut[0]).toBeCloseTo(-3 / Math.sqrt(10), 6);
    expect(cut[1]).toBeCloseTo(-1 / Math.sqrt(10), 6);
  });
});

describe('sigmoid', () => {
  it('is stable at the extremes', () => {
    expect(sigmoid(0)).toBe(0.5);
    expect(sigmoid(1000)).toBe(1);
    expect(sigmoid(-1000)).toBe(0);
    expect(sigmoid(Infinity)).toBe(1);
    expect(sigmoid(-Infinity)).toBe(0);
    expect(sigmoid(-50) / 1.928749847963918e-22).toBeCloseTo(1, 12);
    expect(sigmoid(-700)).toBeGreaterThan(0);
    for (const x of [-30, -2.5, -0.1, 0.1, 2.5, 30]) expect(sigmoid(x) + sigmoid(-x)).toBeCloseTo(1, 15);
  });
});

describe('cosine', () => {
  it('is the cosine of the angle, whatever the lengths, and 0 against a zero vector', () => {
    expect(cosine(new Float32Array([1, 0]), new Float32Array([0, 3]))).toBe(0);
    expect(cosine(new Float32Array([1, 1]), new Float32Array([2, 2]))).toBeCloseTo(1, 6);
    expect(cosine(new Float32Array([1, 2]), new Float32Array([-2, -4]))).toBeCloseTo(-1, 6);
    expect(cosine(new Float32Array([3, 4]), new Float32Array([4, 3]))).toBeCloseTo(24 / 25, 6);
    expect(cosine(new Float32Array([0, 0]), new Float32Array([1, 2]))).toBe(0);
  });
});

describe("quantize (as sentence-transformers' quantize_embeddings)", () => {
  it('packs sign bits big-endian, 8 to a byte, the last byte padded with 0 bits; binary is the byte minus 128', () => {
    // > 0 sets the bit: 0 and negative values do not.
    const rows = Float32Array.from([
      1, -1, 0, 2, 0.5, -0.1, 3, 1e-9, /* byte 2: */ 7, -2, /* row 2 */ -1, -1, -1, -1, -1, -1, -1, -1, -1, 4,
    ]);
    const packed = packSignBits(rows, 10);
    expect(Array.from(packed)).toEqual([0b10011011, 0b10000000, 0b00000000, 0b01000000]);
    expect(quantizedWidth('ubinary', 10)).toBe(2);
    expect(Array.from(quantize(rows, 10, 'ubinary'))).toEqual(Array.from(packed));
    expect(Array.from(quantize(rows, 10, 'binary'))).toEqual([0b10011011 - 128, 0, -128, 64 - 128]);
  });

  it("maps each dimension's calibrated range onto 256 levels, truncating toward zero, clamping outside the range", () => {
    // Calibration: dimension 0 spans [0, 1], dimension 1 [-1, 1], dimension 2 is constant.
    const ranges = calibrationRanges(Float32Array.from([0, -1, 5, 1, 1, 5, 0.5, 0, 5]), 3);
    expect(Array.from(ranges.starts)).toEqual([0, -1, 5]);
    expect(ranges.steps[0]).toBeCloseTo(1 / 255, 9);
    expect(ranges.steps[2]).toBe(0);
    const rows = Float32Array.from([0.5, 0, 5, 1, 1, 9, 2, -3, 5, 0.001, -0.99, 5]);
    // In the range, numpy's values (its float32 arithmetic: the top of the range is 254.99998, so 254; 127.49999 - 128
    // truncates toward zero, to 0); outside it, clamped (numpy wraps), and a constant dimension at the bottom (numpy: NaN).
    expect(Array.from(quantize(rows, 3, 'uint8', ranges))).toEqual([127, 127, 0, 254, 254, 0, 255, 0, 0, 0, 1, 0]);
    expect(Array.from(quantize(rows, 3, 'int8', ranges))).toEqual([
      0, 0, -128, 126, 126, -128, 127, -128, -128, -127, -126, -128,
    ]);
    expect(() => quantize(rows, 3, 'int8')).toThrow(RangeError);
  });
});

describe('float32ToBase64', () => {
  it('writes little-endian float32 bytes', () => {
    expect(float32ToBase64(Float32Array.of(1))).toBe('AACAPw==');
    expect(float32ToBase64(new Float32Array(0))).toBe('');
  });

  it('round-trips, also for a view into a larger buffer', () => {
    const all = Float32Array.from({ length: 400 }, () => Math.random() * 2 - 1);
    const v = all.subarray(7, 391);
    const bytes = Buffer.from(float32ToBase64(v), 'base64');
    const back = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
    expect(Array.from(back)).toEqual(Array.from(v));
  });
});

describe('float32ToJson', () => {
  /** Parses the text and checks every element is the same float32, sign of zero included. */
  function expectRoundTrip(v: Float32Array): string {
    const text = float32ToJson(v);
    const back = JSON.parse(text) as number[];
    expect(back).toHaveLength(v.length);
    for (let i = 0; i < v.length; i++) {
      if (!Object.is(Math.fround(back[i]!), v[i]))
        expect.fail(`element ${i}: ${v[i]} came back as ${back[i]} from ${text.split(',')[i]}`);
    }
    return text;
  }

  const edges = [
    0,
    -0,
    1,
    -1,
    2,
    0.5,
    0.1,
    -0.1,
    1 / 3,
    2 / 3,
    100,
    1e-4,
    9.99999e-5,
    1e-5,
    1e-7,
    1e-38,
    1e-45,
    1.401298464324817e-45, // smallest subnormal
    1.1754942106924411e-38, // largest subnormal
    1.1754943508222875e-38, // smallest normal
    3.4e38,
    3.4028234663852886e38,
    -3.4028234663852886e38, // largest
    16777216,
    16777217,
    123456789,
    1e9,
    1e10,
    1e21,
    1e22,
    4294967296,
    -7,
    42,
    0.001,
    0.0123,
    123.456,
  ];

  it('round-trips edge values exactly and stays short', () => {
    const text = expectRoundTrip(Float32Array.from(edges));
    expect(text.startsWith('[0,-0,1,-1,2,0.5,0.100000001,')).toBe(true);
    expect(float32ToJson(Float32Array.of(16777216, 100, 42, -7))).toBe('[16777216,100,42,-7]');
    expect(float32ToJson(Float32Array.of(1e-45, 3.4028234663852886e38))).toBe('[1.40129846e-45,3.40282347e+38]');
    expect(float32ToJson(new Float32Array(0))).toBe('[]');
  });

  it('writes each vector on its own when the bytes it is written into are reused between calls', () => {
    const long = Float32Array.from({ length: 4096 }, (_, i) => (i % 7) / 3 - 1);
    const longText = expectRoundTrip(long);
    expect(float32ToJson(Float32Array.of(0.25, -2))).toBe('[0.25,-2]');
    expect(float32ToJson(Float32Array.of(7))).toBe('[7]');
    // A vector past the reused buffer's cap, then one within it again.
    expectRoundTrip(Float32Array.from({ length: 100_000 }, (_, i) => Math.sin(i)));
    expect(float32ToJson(long)).toBe(longText);
  });

  it('round-trips random bit patterns exactly with at most 9 significant digits', () => {
    const bits = new Uint32Array(200_000);
    for (let i = 0; i < bits.length; i++) bits[i] = (Math.random() * 2 ** 32) >>> 0;
    const all = new Float32Array(bits.buffer);
    const v = all.filter(Number.isFinite);
    const text = expectRoundTrip(v);
    let mostDigits = 0;
    for (const number of text.slice(1, -1).split(',')) {
      const significand = /^-?(?:0\.0*)?([\d.]*?)(?:e.*)?$/.exec(number)![1]!;
      mostDigits = Math.max(mostDigits, significand.replace('.', '').length);
    }
    expect(mostDigits).toBe(9);
  });

  it('round-trips unit vectors and is shorter than JSON.stringify', () => {
    const v = Float32Array.from({ length: 384 }, () => Math.random() * 2 - 1);
    l2NormalizeRows(v, 384);
    const text = expectRoundTrip(v);
    expect(text.length).toBeLessThan(JSON.stringify(Array.from(v)).length * 0.75);
  });

  it('fits the widest numbers', () => {
    // "-0.000ddddddddd" and "-d.dddddddde-xx" in every slot: the output buffer bound.
    expectRoundTrip(new Float32Array(1000).fill(-0.000123456789));
    expectRoundTrip(new Float32Array(1000).fill(-1.23456789e-38));
    expectRoundTrip(new Float32Array(1000).fill(-1.23456789e-5));
  });

  it('throws on NaN and infinities rather than write invalid JSON', () => {
    for (const bad of [NaN, Infinity, -Infinity])
      expect(() => float32ToJson(Float32Array.of(0.5, bad))).toThrow(/element 1/);
  });
});
