/**
 * GPTQ rounding and the calibration that feeds it: the numerics on small matrices, the
 * statistics onnxruntime collects, the calibration inputs built from text, and quantizeModel
 * with calibration on the tiny BERT models.
 */
import * as ort from 'onnxruntime-node';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  calibrationRuns,
  calibrationSequences,
  readCalibrationTexts,
  DEFAULT_CALIBRATION_FILE,
  loadCalibrationTexts,
} from '../../src/quantize/calibration-inputs.js';
import { collectInputStats } from '../../src/quantize/calibration-stats.js';
import { gptqRound } from '../../src/quantize/gptq.js';
import { columnScales, QMAX, toGrid } from '../../src/quantize/int8-grid.js';
import { initializerToFloat32, writeModel } from '../../src/onnx/model.js';
import { DataType } from '../../src/onnx/proto.js';
import { calibrationTargets, quantizeModel, quantizeWeight } from '../../src/quantize/graph.js';
import { formatQuantizeReport } from '../../src/quantize/report.js';
import { TextTokenizer } from '../../src/text/tokenizer.js';
import { buildTinyBert, TINY_BERT, TINY_VOCAB, tokenizerJson } from '../fixtures/tiny-models.js';

/** Deterministic uniforms in [-1, 1). */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 31 - 1;
  };
}

/** `rows` x `k` inputs whose columns are strongly correlated: a few shared factors plus noise. */
function correlatedInputs(rows: number, k: number, seed: number): Float64Array {
  const next = random(seed);
  const factors = 3;
  const mixing = Float64Array.from({ length: factors * k }, () => next());
  const x = new Float64Array(rows * k);
  for (let r = 0; r < rows; r++) {
    const f = Array.from({ length: factors }, () => next() * 2);
    for (let j = 0; j < k; j++) {
      let v = 0.1 * next();
      for (let t = 0; t < factors; t++) v += f[t]! * mixing[t * k + j]!;
      x[r * k + j] = v;
    }
  }
  return x;
}

function gram(x: Float64Array, rows: number, k: number): Float64Array {
  const h = new Float64Array(k * k);
  for (let r = 0; r < rows; r++)
    for (let i = 0; i < k; i++) for (let j = 0; j < k; j++) h[i * k + j]! += x[r * k + i]! * x[r * k + j]!;
  return h;
}

/** Sum over rows and columns of (x . (w - q * scale))^2: the MatMul's output error. */
function outputError(
  x: Float64Array,
  rows: number,
  w: Float32Array,
  values: Int8Array,
  scales: Float32Array,
  k: number,
  n: number,
): number {
  let total = 0;
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < n; c++) {
      let e = 0;
      for (let i = 0; i < k; i++) e += x[r * k + i]! * (w[i * n + c]! - values[i * n + c]! * scales[c]!);
      total += e * e;
    }
  }
  return total;
}

describe('gptqRound', () => {
  const k = 24;
  const n = 10;
  const rows = 400;
  const next = random(5);
  const w = Float32Array.from({ length: k * n }, () => next() * 0.05);
  const x = correlatedInputs(rows, k, 9);
  const h = gram(x, rows, k);
  const scales = columnScales(w, k, n)!;

  it('gives a smaller MatMul output error than rounding to nearest when inputs are correlated', () => {
    const gptq = gptqRound(w, k, n, scales, h);
    const nearest = quantizeWeight(w, k, n)!;
    expect([...nearest.scales]).toEqual([...scales]);
    const [eg, en] = [
      outputError(x, rows, w, gptq, scales, k, n),
      outputError(x, rows, w, nearest.values, scales, k, n),
    ];
    console.log(`output error, sum of squares: GPTQ ${eg.toExponential(3)}, nearest ${en.toExponential(3)}`);
    expect(eg).toBeLessThan(en * 0.5);
    // It moves values away from the nearest grid point (by a step or so), never off the grid.
    expect(gptq.some((v, i) => v !== nearest.values[i])).toBe(true);
    for (const v of gptq) expect(Math.abs(v)).toBeLessThanOrEqual(QMAX);
  });

  it('is exact on a matrix already on the grid, whatever the inputs', () => {
    // Powers of two as scales, so that q * scale and max / QMAX are exact in float32.
    const q = Int8Array.from({ length: k * n }, () => Math.round(next() * QMAX));
    for (let c = 0; c < n; c++) q[c] = QMAX; // the first row holds each column's maximum
    const s = Float32Array.from({ length: n }, (_, c) => 2 ** -(c + 3));
    const onGrid = Float32Array.from(q, (v, i) => v * s[i % n]!);
    expect([...columnScales(onGrid, k, n)!]).toEqual([...s]);
    expect([...gptqRound(onGrid, k, n, s, h)]).toEqual([...q]);
  });

  it('is rounding to nearest when the inputs are uncorrelated (diagonal X^T X)', () => {
    const diagonal = new Float64Array(k * k);
    for (let i = 0; i < k; i++) diagonal[i * k + i] = 1 + i;
    const nearest = Int8Array.from(w, (v, i) => toGrid(v, scales[i % n]!));
    expect([...gptqRound(w, k, n, scales, diagonal)]).toEqual([...nearest]);
  });

  it('copes with singular statistics: fewer rows than inputs, an input that is always zero, no rows at all', () => {
    const few = correlatedInputs(5, k, 3);
    for (let r = 0; r < 5; r++) few[r * k + 7] = 0;
    const singular = gram(few, 5, k);
    const values = gptqRound(w, k, n, scales, singular);
    expect(outputError(few, 5, w, values, scales, k, n)).toBeLessThanOrEqual(
      outputError(few, 5, w, quantizeWeight(w, k, n)!.values, scales, k, n),
    );
    // All zero: nothing to go by, so to nearest.
    expect([...gptqRound(w, k, n, scales, new Float64Array(k * k))]).toEqual([...quantizeWeight(w, k, n)!.values]);
  });

  it('keeps to [-QMAX, QMAX] when compensation pushes past the end of the grid', () => {
    // Every weight near the column maximum, so that pushed errors would overflow.
    const big = Float32Array.from({ length: k * n }, (_, i) => (i % 3 === 0 ? 1 : 0.995) * (i % 2 ? 1 : -1));
    const values = gptqRound(big, k, n, columnScales(big, k, n)!, h);
    for (const v of values) expect(Math.abs(v)).toBeLessThanOrEqual(QMAX);
  });

  it('rejects statistics that are not a covariance', () => {
    const bad = new Float64Array(k * k).fill(0);
    for (let i = 0; i < k; i++) bad[i * k + i] = i === 3 ? -1e6 : 1;
    expect(() => gptqRound(w, k, n, scales, bad)).toThrow(/not positive definite/);
  });
});

describe('collectInputStats', () => {
  it('returns X^T X and the row count of every MatMul input, as onnxruntime computes the activations', async () => {
    const model = buildTinyBert('reranker');
    const targets = calibrationTargets(model);
    // q/k/v share an input: 4 per layer, + pooler and classifier
    expect(targets.size).toBe(2 * 4 + 2);
    const seq = 9;
    const ids = BigInt64Array.from({ length: seq }, (_, i) => BigInt(i === 0 ? 2 : i === seq - 1 ? 3 : 10 + i));
    const feeds = {
      input_ids: new ort.Tensor('int64', ids, [1, seq]),
      attention_mask: new ort.Tensor('int64', new BigInt64Array(seq).fill(1n), [1, seq]),
      token_type_ids: new ort.Tensor('int64', new BigInt64Array(seq), [1, seq]),
    };
    // Two runs of the same input: everything counts twice.
    const stats = await collectInputStats(model, targets, [feeds, feeds]);

    // The activations themselves, as extra outputs of the plain graph.
    const probe = {
      ...model,
      graph: {
        ...model.graph!,
        output: [
          ...model.graph!.output!,
          ...[...targets.keys()].map((name) => ({ name, type: { tensorType: { elemType: DataType.FLOAT } } })),
        ],
      },
    };
    const session = await ort.InferenceSession.create(writeModel(probe));
    const out = await session.run(feeds);
    await session.release();
    for (const [name, k] of targets) {
      const x = out[name]!.data as Float32Array;
      const rows = x.length / k;
      const s = stats.get(name)!;
      expect(s.k).toBe(k);
      expect(s.rows).toBe(2 * rows);
      expect(rows === seq || rows === 1, name).toBe(true); // token rows, or the pooler's [CLS] row
      let worst = 0;
      for (let i = 0; i < k; i++) {
        for (let j = 0; j < k; j++) {
          let v = 0;
          for (let r = 0; r < rows; r++) v += x[r * k + i]! * x[r * k + j]!;
          worst = Math.max(worst, Math.abs(2 * v - s.xtx[i * k + j]!) / (1 + Math.abs(v)));
        }
      }
      expect(worst, name).toBeLessThan(1e-4);
    }
  });
});

describe('calibration inputs', () => {
  let tokenizer: TextTokenizer;
  beforeAll(() => {
    tokenizer = TextTokenizer.fromJson(tokenizerJson());
  });

  it('reads one text per non-blank line; the shipped file is English text of a few KB', async () => {
    expect(readCalibrationTexts('first line\r\n\n  second  \n\t\nthird')).toEqual(['first line', 'second', 'third']);
    const { source, texts } = await loadCalibrationTexts();
    expect(source).toBe(DEFAULT_CALIBRATION_FILE);
    expect(texts.length).toBeGreaterThanOrEqual(50);
    expect(texts.join('\n').length).toBeGreaterThan(5_000);
  });

  const texts = [
    'what is the capital of france',
    'how do i reset my password',
    'the quick brown fox jumps over the lazy dog and the cat is not there, the dog is old and slow and good',
    'paris is the capital and the first city of france, with water and light and music and food for people',
    'a new search model can answer the question fast: it has an embedding for each document and a query',
  ];

  it('pairs short lines (queries) with long ones (passages) for a cross-encoder, each passage with two queries', () => {
    const pairs = calibrationSequences(texts, tokenizer, 'rerank', 512);
    // 3 passages + 1 joined run of texts, each with 2 queries
    expect(pairs).toHaveLength(8);
    for (const p of pairs) {
      expect(p.typeIds).toBeDefined();
      expect(p.ids[0]).toBe(TINY_VOCAB.indexOf('[CLS]'));
      expect(p.ids[p.ids.length - 1]).toBe(TINY_VOCAB.indexOf('[SEP]'));
      // [CLS] query [SEP] is segment 0, the passage and its [SEP] segment 1
      const second = p.typeIds!.indexOf(1);
      expect(p.ids[second - 1]).toBe(TINY_VOCAB.indexOf('[SEP]'));
      expect([...p.typeIds!.subarray(second)].every((t) => t === 1)).toBe(true);
    }
    const singles = calibrationSequences(texts, tokenizer, 'embedding', 512);
    expect(singles).toHaveLength(texts.length + 1);
    expect(singles.every((s) => s.typeIds === undefined)).toBe(true);
    // The joined run is longer than any one text, and no input exceeds the window asked for.
    expect(Math.max(...singles.map((s) => s.ids.length))).toBeGreaterThan(
      Math.max(...singles.slice(0, -1).map((s) => s.ids.length)),
    );
    expect(Math.max(...calibrationSequences(texts, tokenizer, 'embedding', 16).map((s) => s.ids.length))).toBe(16);
  });

  it('runs equal-length batches without padding, each input cut to a fixed length ending with its [SEP]', () => {
    const sequences = calibrationSequences(texts, tokenizer, 'rerank', 512);
    const { runs, tokens } = calibrationRuns(sequences, ['input_ids', 'attention_mask', 'token_type_ids']);
    let seen = 0;
    for (const feeds of runs) {
      const [rows, length] = feeds.input_ids!.dims as number[];
      expect(feeds.attention_mask!.dims).toEqual([rows, length]);
      expect([...(feeds.attention_mask!.data as BigInt64Array)].every((m) => m === 1n)).toBe(true);
      const ids = feeds.input_ids!.data as BigInt64Array;
      for (let r = 0; r < rows!; r++) expect(ids[r * length! + length! - 1]).toBe(BigInt(TINY_VOCAB.indexOf('[SEP]')));
      seen += rows! * length!;
      // No input loses more than a third of its tokens.
    }
    expect(tokens).toBe(seen);
    const total = sequences.reduce((sum, s) => sum + s.ids.length, 0);
    expect(tokens).toBeGreaterThan(total * 0.66);
    // A graph without token_type_ids is not fed them; an unknown input is refused.
    expect(Object.keys(calibrationRuns(sequences, ['input_ids', 'attention_mask']).runs[0]!)).toEqual([
      'input_ids',
      'attention_mask',
    ]);
    expect(() => calibrationRuns(sequences, ['input_ids', 'pixel_values'])).toThrow(/pixel_values/);
  });
});

describe('quantizeModel with calibration (tiny BERT)', () => {
  it('rounds every converted weight with GPTQ on the same per-column grid, and says so', async () => {
    const model = buildTinyBert('reranker');
    const tokenizer = TextTokenizer.fromJson(tokenizerJson());
    const { texts } = await loadCalibrationTexts();
    const { runs } = calibrationRuns(
      calibrationSequences(texts, tokenizer, 'rerank', TINY_BERT.maxPositions),
      model.graph!.input!.map((v) => v.name!),
    );
    const stats = await collectInputStats(model, calibrationTargets(model), runs);
    const calibrated = quantizeModel(model, { calibration: stats });
    const plain = quantizeModel(model);
    expect(calibrated.report.converted.map((c) => c.name)).toEqual(plain.report.converted.map((c) => c.name));
    expect(calibrated.report.converted.every((c) => c.rounding === 'gptq' && c.biasFolded)).toBe(true);
    expect(plain.report.converted.every((c) => c.rounding === 'nearest')).toBe(true);
    const init = (m: typeof model, name: string) => m.graph!.initializer!.find((t) => t.name === name)!;
    let changed = 0;
    for (const c of plain.report.converted) {
      expect(initializerToFloat32(init(calibrated.model, `${c.weight}_scale`))).toEqual(
        initializerToFloat32(init(plain.model, `${c.weight}_scale`)),
      );
      const [a, b] = [
        init(calibrated.model, `${c.weight}_quantized`).rawData!,
        init(plain.model, `${c.weight}_quantized`).rawData!,
      ];
      expect(a.length).toBe(b.length);
      if (!Buffer.from(a).equals(Buffer.from(b))) changed++;
    }
    expect(changed).toBeGreaterThan(plain.report.converted.length / 2);
    expect(
      formatQuantizeReport({
        ...calibrated.report,
        calibration: { source: 'texts.txt', inputs: 12, tokens: 345, seconds: 1.25 },
      }),
    ).toMatch(/^rounding: GPTQ, calibrated on 12 inputs \(345 tokens\) from texts.txt in 1.3 s$/m);
    expect(formatQuantizeReport({ ...plain.report, uncalibrated: 'calibration turned off' })).toMatch(
      /^rounding: to nearest \(calibration turned off\)$/m,
    );
  });
});
