import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createGraph,
  createModel,
  initializerToFloat32,
  node,
  readModel,
  tensor,
  tensorFromFloat32,
  toNumber,
  valueInfo,
  writeModel,
  type OnnxModel,
} from '../../src/onnx/model.js';
import { DataLocation, DataType, type NodeProto, type TensorProto } from '../../src/onnx/proto.js';
import { MS_DOMAIN, quantizeFile, quantizeModel, quantizeWeight } from '../../src/quantize/graph.js';
import { QMAX } from '../../src/quantize/int8-grid.js';
import { cosine } from '../../src/vectors/scores.js';
import { formatQuantizeReport } from '../../src/quantize/report.js';
import { buildTinyBert, TINY_BERT, TINY_VOCAB, type TinyModelKind } from '../fixtures/tiny-models.js';
import { output } from '../helpers/ort.js';

// --- helpers -----------------------------------------------------------------------

/** Deterministic uniforms in [-1, 1). */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 31 - 1;
  };
}

function floats(n: number, seed: number, scale = 1): Float32Array {
  const next = random(seed);
  return Float32Array.from({ length: n }, () => next() * scale);
}

const ops = (m: OnnxModel, opType: string) => m.graph!.node!.filter((n) => n.opType === opType);
const initializer = (m: OnnxModel, name: string) => m.graph!.initializer!.find((t) => t.name === name);

async function session(m: OnnxModel): Promise<ort.InferenceSession> {
  return ort.InferenceSession.create(writeModel(m), { intraOpNumThreads: 1, interOpNumThreads: 1 });
}

/** Runs `m` once; the result reads an output by name, and fails the test for one the graph did not give. */
async function run(m: OnnxModel, feeds: Record<string, ort.Tensor>): Promise<(name: string) => Float32Array> {
  const s = await session(m);
  try {
    const out = await s.run(feeds);
    return (name) => output(out, name).data as Float32Array;
  } finally {
    await s.release();
  }
}

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i]! - b[i]!));
  return d;
}

/** A small float graph: `x` [batch, K] in, whatever `nodes` compute out. */
function smallModel(nodes: NodeProto[], initializers: TensorProto[], outputs: [string, number[]][], k = 4): OnnxModel {
  return createModel(
    createGraph({
      name: 'small',
      nodes,
      initializers,
      inputs: [valueInfo('x', DataType.FLOAT, ['batch', k])],
      outputs: outputs.map(([name, dims]) => valueInfo(name, DataType.FLOAT, ['batch', ...dims])),
    }),
  );
}

const weight = (name: string, k: number, n: number, seed: number) =>
  tensorFromFloat32(name, [k, n], floats(k * n, seed));
const bias = (name: string, n: number, seed: number) => tensorFromFloat32(name, [n], floats(n, seed, 0.1));
const xFeed = (rows: number, k = 4, seed = 7) => ({ x: new ort.Tensor('float32', floats(rows * k, seed), [rows, k]) });

// --- tiny BERT ---------------------------------------------------------------------

const PAD = TINY_VOCAB.indexOf('[PAD]');
const CLS = TINY_VOCAB.indexOf('[CLS]');
const SEP = TINY_VOCAB.indexOf('[SEP]');

/** Right-padded random token rows of the given lengths; the second half of each row is segment 1. */
function tokenFeeds(lengths: number[], withTokenTypes: boolean): Record<string, ort.Tensor> {
  const next = random(42);
  const seq = Math.max(...lengths);
  const ids = new BigInt64Array(lengths.length * seq).fill(BigInt(PAD));
  const mask = new BigInt64Array(lengths.length * seq);
  const types = new BigInt64Array(lengths.length * seq);
  lengths.forEach((len, r) => {
    for (let j = 0; j < len; j++) {
      const word = 5 + Math.floor(((next() + 1) / 2) * (TINY_VOCAB.length - 5));
      ids[r * seq + j] = BigInt(j === 0 ? CLS : j === len - 1 ? SEP : word);
      mask[r * seq + j] = 1n;
      types[r * seq + j] = j >= len / 2 ? 1n : 0n;
    }
  });
  const dims = [lengths.length, seq];
  return {
    input_ids: new ort.Tensor('int64', ids, dims),
    attention_mask: new ort.Tensor('int64', mask, dims),
    ...(withTokenTypes ? { token_type_ids: new ort.Tensor('int64', types, dims) } : {}),
  };
}

/** Mask-weighted mean of `last_hidden_state` [B, S, H] per row. */
function meanPool(hidden: Float32Array, lengths: number[]): Float32Array[] {
  const H = TINY_BERT.hidden;
  const seq = Math.max(...lengths);
  return lengths.map((len, r) => {
    const v = new Float32Array(H);
    for (let j = 0; j < len; j++) for (let h = 0; h < H; h++) v[h]! += hidden[(r * seq + j) * H + h]! / len;
    return v;
  });
}

describe('quantizeModel on the tiny BERT models', () => {
  const kinds: TinyModelKind[] = ['embedder', 'embedderSentence', 'reranker'];
  const models = {} as Record<
    TinyModelKind,
    { fp32: OnnxModel; int8: OnnxModel; report: ReturnType<typeof quantizeModel>['report'] }
  >;

  beforeAll(() => {
    for (const kind of kinds) {
      const fp32 = buildTinyBert(kind);
      const { model: int8, report } = quantizeModel(fp32);
      models[kind] = { fp32, int8, report };
    }
  });

  it.each(kinds)('%s: converts every weight MatMul and folds its bias Add', (kind) => {
    const { fp32, int8, report } = models[kind];
    const weightMatMuls = ops(fp32, 'MatMul').filter((n) => initializer(fp32, n.input![1]!));
    // q, k, v, attention output, FFN in, FFN out per layer; + pooler and classifier for the reranker
    expect(weightMatMuls).toHaveLength(TINY_BERT.layers * 6 + (kind === 'reranker' ? 2 : 0));
    expect(report.converted.map((c) => c.weight).sort()).toEqual(weightMatMuls.map((n) => n.input![1]).sort());
    expect(report.converted.every((c) => c.biasFolded)).toBe(true);
    // Only the two activation x activation MatMuls of each attention layer stay.
    expect(report.skipped).toHaveLength(TINY_BERT.layers * 2);
    expect(report.skipped.every((s) => /not an initializer/.test(s.reason))).toBe(true);
    expect(ops(int8, 'MatMul')).toHaveLength(TINY_BERT.layers * 2);
    expect(ops(int8, 'DynamicQuantizeMatMul')).toHaveLength(weightMatMuls.length);
    expect(ops(int8, 'Add').length).toBe(ops(fp32, 'Add').length - weightMatMuls.length);
    expect(int8.opsetImport).toContainEqual({ domain: MS_DOMAIN, version: 1 });
    // The float weights are gone; int8 values, per-column scales and zero points take their place.
    for (const c of report.converted) {
      expect(initializer(int8, c.weight)).toBeUndefined();
      const dq = ops(int8, 'DynamicQuantizeMatMul').find((n) => n.name === `${c.name}_quant`)!;
      expect(dq.domain).toBe(MS_DOMAIN);
      expect(dq.input).toHaveLength(5);
      const [values, scale, zeroPoint, b] = dq.input!.slice(1).map((name) => initializer(int8, name)!) as [
        TensorProto,
        TensorProto,
        TensorProto,
        TensorProto,
      ];
      expect(values.dataType).toBe(DataType.INT8);
      expect(values.dims!.map(toNumber)).toEqual(c.shape);
      expect(scale.dims!.map(toNumber)).toEqual([c.shape[1]]);
      expect(zeroPoint.dataType).toBe(DataType.INT8);
      expect([...zeroPoint.rawData!]).toEqual(new Array(c.shape[1]).fill(0));
      expect(b.dataType).toBe(DataType.FLOAT);
    }
    expect(report.bytesAfter).toBe(writeModel(int8).length);
    expect(report.bytesBefore).toBe(writeModel(fp32).length);
    expect(report.bytesAfter).toBeLessThan(report.bytesBefore);
    expect(formatQuantizeReport(report)).toContain(`${weightMatMuls.length} MatMul(s) -> DynamicQuantizeMatMul`);
  });

  it('does not modify the model it is given', () => {
    const fp32 = buildTinyBert('embedder');
    const before = writeModel(fp32);
    quantizeModel(fp32);
    expect(Buffer.from(writeModel(fp32)).equals(Buffer.from(before))).toBe(true);
  });

  it('the int8 graphs load in onnxruntime and stay close to float32', async () => {
    const lengths = [12, 7, 30, 3];
    // Measured: cosine ~0.9999, logits within ~0.015. The real-size bounds are in
    // test/e2e/quantize-accuracy.test.ts; these only need to catch a broken conversion.
    for (const kind of ['embedder', 'embedderSentence'] as const) {
      const feeds = tokenFeeds(lengths, kind === 'embedder');
      const [a, b] = [await run(models[kind].fp32, feeds), await run(models[kind].int8, feeds)];
      const pa = meanPool(a('last_hidden_state'), lengths);
      const pb = meanPool(b('last_hidden_state'), lengths);
      const cosines = pa.map((v, i) => cosine(v, pb[i]!));
      console.log(`tiny ${kind}: pooled cosine int8 vs fp32 min ${Math.min(...cosines).toFixed(5)}`);
      expect(Math.min(...cosines)).toBeGreaterThanOrEqual(0.999);
      if (kind === 'embedderSentence') {
        const s = lengths.map((_, i) =>
          cosine(
            a('sentence_embedding').subarray(i * 32, i * 32 + 32),
            b('sentence_embedding').subarray(i * 32, i * 32 + 32),
          ),
        );
        expect(Math.min(...s)).toBeGreaterThanOrEqual(0.999);
      }
    }
    const feeds = tokenFeeds(lengths, true);
    const [a, b] = [await run(models.reranker.fp32, feeds), await run(models.reranker.int8, feeds)];
    const diff = maxAbsDiff(a('logits'), b('logits'));
    console.log(
      `tiny reranker: logits ${[...a('logits')].map((v) => v.toFixed(3)).join(',')}, max |int8 - fp32| ${diff.toFixed(4)}`,
    );
    expect(diff).toBeLessThan(0.05);
  });

  it('refuses to quantize an already quantized model', () => {
    expect(() => quantizeModel(models.embedder.int8)).toThrow(/already quantized.*DynamicQuantizeMatMul/);
  });
});

// --- quantization arithmetic -------------------------------------------------------

describe('quantizeWeight', () => {
  it('is symmetric per column, max |w| maps to 63 (7 bits: no int16 overflow in AVX2 kernels)', () => {
    // [3, 3]: columns with maxima 2, 0.5 and 0 (an all-zero column)
    const w = Float32Array.from([2, -0.5, 0, -1.1, 0.3, 0, 0.5, 0.1, 0]);
    const q = quantizeWeight(w, 3, 3)!;
    expect(QMAX).toBe(63);
    expect([...q.scales]).toEqual([Math.fround(2 / 63), Math.fround(0.5 / 63), 1]);
    expect([...q.values]).toEqual([63, -63, 0, -35, 38, 0, 16, 13, 0]);
  });

  it('rounds half to even and never leaves [-63, 63]', () => {
    const k = 2000;
    const w = floats(k * 3, 3, 10);
    const q = quantizeWeight(w, k, 3)!;
    for (let i = 0; i < w.length; i++) {
      const scale = q.scales[i % 3]!;
      expect(Math.abs(q.values[i]!)).toBeLessThanOrEqual(63);
      expect(Math.abs(q.values[i]! * scale - w[i]!)).toBeLessThanOrEqual(scale / 2 + 1e-7);
    }
    // 126 and 125 times the scale: 63 exactly, and a tie between 62 and 63 that goes to 62
    const ties = quantizeWeight(Float32Array.from([126, 125]), 2, 1)!;
    expect([...ties.values]).toEqual([63, 62]);
  });

  it('declines NaN and infinite weights', () => {
    expect(quantizeWeight(Float32Array.from([1, Number.NaN]), 1, 2)).toBeUndefined();
    expect(quantizeWeight(Float32Array.from([1, -Infinity]), 2, 1)).toBeUndefined();
  });
});

describe('DynamicQuantizeMatMul in onnxruntime', () => {
  it('applies the scales per column', async () => {
    // Column magnitudes from 1e-3 to 1e3: with one scale for the whole matrix the small
    // columns would round to zero.
    const k = 16;
    const n = 7;
    const w = floats(k * n, 11);
    for (let i = 0; i < w.length; i++) w[i]! *= 10 ** ((i % n) - 3);
    const model = smallModel(
      [node('MatMul', ['x', 'w'], ['y_mm'], [], '', 'mm'), node('Add', ['y_mm', 'b'], ['y'], [], '', 'add')],
      [tensorFromFloat32('w', [k, n], w), bias('b', n, 12)],
      [['y', [n]]],
      k,
    );
    const { model: int8, report } = quantizeModel(model);
    expect(report.converted).toEqual([
      { name: 'mm', weight: 'w', shape: [k, n], biasFolded: true, rounding: 'nearest' },
    ]);
    const feeds = xFeed(5, k);
    const [a, b] = [await run(model, feeds), await run(int8, feeds)];
    for (let c = 0; c < n; c++) {
      const col = (y: Float32Array) =>
        Array.from({ length: 5 }, (_, r) => y[r * n + c]! - initializerToFloat32(initializer(model, 'b')!)[c]!);
      const [ya, yb] = [col(a('y')), col(b('y'))];
      const size = Math.max(...ya.map(Math.abs));
      expect(maxAbsDiff(ya, yb) / size, `column ${c}`).toBeLessThan(0.03);
    }
  });
});

// --- graph rewriting edge cases ----------------------------------------------------

describe('quantizeModel on edge cases', () => {
  it('keeps a weight shared with a non-MatMul node float, and reports the MatMul skipped', async () => {
    const model = smallModel(
      [
        node('MatMul', ['x', 'wa'], ['ha'], [], '', 'mm_a'),
        node('Add', ['ha', 'ba'], ['h'], [], '', 'add_a'),
        node('MatMul', ['h', 'ws'], ['y'], [], '', 'mm_shared'),
        node('Transpose', ['ws'], ['ws_t'], [], '', 'transpose'),
      ],
      [weight('wa', 4, 8, 1), bias('ba', 8, 2), weight('ws', 8, 8, 3)],
      [
        ['y', [8]],
        ['ws_t', [8]],
      ],
    );
    const { model: int8, report } = quantizeModel(model);
    expect(report.converted).toEqual([
      { name: 'mm_a', weight: 'wa', shape: [4, 8], biasFolded: true, rounding: 'nearest' },
    ]);
    expect(report.skipped).toEqual([
      { name: 'mm_shared', weight: 'ws', reason: 'B is also used by Transpose node transpose' },
    ]);
    expect(initializer(int8, 'ws')).toBe(initializer(model, 'ws'));
    expect(ops(int8, 'MatMul').map((n) => n.name)).toEqual(['mm_shared']);

    const feeds = xFeed(3);
    const [a, b] = [await run(model, feeds), await run(int8, feeds)];
    expect(b('ws_t')).toEqual(a('ws_t'));
    expect(cosine(a('y'), b('y'))).toBeGreaterThan(0.999);
  });

  it('quantizes a weight used by two MatMuls once', async () => {
    const model = smallModel(
      [
        node('MatMul', ['x', 'w'], ['y1'], [], '', 'mm1'),
        node('Relu', ['x'], ['r']),
        node('MatMul', ['r', 'w'], ['y2'], [], '', 'mm2'),
      ],
      [weight('w', 4, 6, 5)],
      [
        ['y1', [6]],
        ['y2', [6]],
      ],
    );
    const { model: int8, report } = quantizeModel(model);
    expect(report.converted.map((c) => c.name)).toEqual(['mm1', 'mm2']);
    expect(int8.graph!.initializer!.map((t) => t.name)).toEqual(['w_quantized', 'w_scale', 'w_zero_point']);
    const [d1, d2] = ops(int8, 'DynamicQuantizeMatMul') as [NodeProto, NodeProto];
    expect(d1.input!.slice(1)).toEqual(d2.input!.slice(1));
    expect(d1.output).toEqual(['y1']);
    const feeds = xFeed(2);
    const [a, b] = [await run(model, feeds), await run(int8, feeds)];
    expect(cosine(a('y1'), b('y1'))).toBeGreaterThan(0.999);
    expect(cosine(a('y2'), b('y2'))).toBeGreaterThan(0.999);
  });

  it('folds an Add only when it is the sole user of the MatMul output and adds a length-N bias', async () => {
    const model = smallModel(
      [
        // output also read by Relu: no fold
        node('MatMul', ['x', 'w1'], ['m1'], [], '', 'mm1'),
        node('Add', ['m1', 'b1'], ['y1']),
        node('Relu', ['m1'], ['r1']),
        // output is a graph output: no fold
        node('MatMul', ['x', 'w2'], ['m2'], [], '', 'mm2'),
        node('Add', ['b2', 'm2'], ['y2']),
        // broadcast of a [1] bias: not a per-column bias, no fold
        node('MatMul', ['x', 'w3'], ['m3'], [], '', 'mm3'),
        node('Add', ['m3', 'b3'], ['y3']),
        // bias first, as torch.onnx writes it: folded
        node('MatMul', ['x', 'w4'], ['m4'], [], '', 'mm4'),
        node('Add', ['b4', 'm4'], ['y4']),
      ],
      [
        weight('w1', 4, 5, 1),
        bias('b1', 5, 2),
        weight('w2', 4, 5, 3),
        bias('b2', 5, 4),
        weight('w3', 4, 5, 5),
        bias('b3', 1, 6),
        weight('w4', 4, 5, 7),
        bias('b4', 5, 8),
      ],
      [
        ['y1', [5]],
        ['r1', [5]],
        ['m2', [5]],
        ['y2', [5]],
        ['y3', [5]],
        ['y4', [5]],
      ],
    );
    const { model: int8, report } = quantizeModel(model);
    expect(report.converted.map((c) => [c.name, c.biasFolded])).toEqual([
      ['mm1', false],
      ['mm2', false],
      ['mm3', false],
      ['mm4', true],
    ]);
    expect(ops(int8, 'Add')).toHaveLength(3);
    expect(ops(int8, 'DynamicQuantizeMatMul').at(-1)!.input).toEqual([
      'x',
      'w4_quantized',
      'w4_scale',
      'w4_zero_point',
      'b4',
    ]);
    const feeds = xFeed(3);
    const [a, b] = [await run(model, feeds), await run(int8, feeds)];
    for (const name of ['y1', 'r1', 'm2', 'y2', 'y3', 'y4'])
      expect(cosine(a(name), b(name)), name).toBeGreaterThan(0.999);
  });

  it('skips weights that are not 2-D float32 matrices', () => {
    const model = createModel(
      createGraph({
        name: 'skips',
        nodes: [
          node('MatMul', ['x', 'w'], ['y'], [], '', 'mm'),
          node('MatMul', ['x3', 'w3'], ['y3'], [], '', 'mm_3d'),
          node('MatMul', ['xd', 'wd'], ['yd'], [], '', 'mm_double'),
          node('MatMul', ['x', 'wi'], ['yi'], [], '', 'mm_input'),
        ],
        initializers: [
          weight('w', 4, 2, 1),
          tensorFromFloat32('w3', [2, 4, 2], floats(16, 2)),
          tensor('wd', DataType.DOUBLE, [4, 2], new Float64Array(8)),
          weight('wi', 4, 2, 3),
        ],
        inputs: [
          valueInfo('x', DataType.FLOAT, ['batch', 4]),
          valueInfo('x3', DataType.FLOAT, [2, 'batch', 4]),
          valueInfo('xd', DataType.DOUBLE, ['batch', 4]),
          // an initializer listed as an input (IR < 4 style) is a default callers may override
          valueInfo('wi', DataType.FLOAT, [4, 2]),
        ],
        outputs: ['y', 'y3', 'yd', 'yi'].map((name) => valueInfo(name, DataType.FLOAT, [])),
      }),
    );
    const { report } = quantizeModel(model);
    expect(report.converted.map((c) => c.name)).toEqual(['mm']);
    expect(report.skipped).toEqual([
      { name: 'mm_3d', weight: 'w3', reason: 'B is 3-D, not a 2-D matrix' },
      { name: 'mm_double', weight: 'wd', reason: `B has ONNX data type ${DataType.DOUBLE}, not float32` },
      { name: 'mm_input', weight: 'wi', reason: 'B is also a graph input, so callers may override it' },
    ]);
  });

  it('refuses a graph with no MatMul to convert', () => {
    const model = smallModel([node('MatMul', ['x', 'x_t'], ['y']), node('Transpose', ['x'], ['x_t'])], [], [['y', []]]);
    expect(() => quantizeModel(model)).toThrow(/nothing to quantize.*not an initializer/);
  });

  it('refuses a graph with external-data initializers', () => {
    const model = smallModel([node('MatMul', ['x', 'w'], ['y'])], [weight('w', 4, 2, 1)], [['y', [2]]]);
    const w = model.graph!.initializer![0]!;
    Object.assign(w, {
      rawData: undefined,
      dataLocation: DataLocation.EXTERNAL,
      externalData: [{ key: 'location', value: 'model.onnx.data' }],
    });
    expect(() => quantizeModel(model)).toThrow(/external file/);
  });
});

// --- files -------------------------------------------------------------------------

describe('quantizeFile', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'onnx-gateway-quantize-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('writes the quantized model and reports both file sizes', async () => {
    const fp32 = buildTinyBert('reranker');
    const input = join(dir, 'model.onnx');
    await writeFile(input, writeModel(fp32));
    const output = join(dir, 'model_int8.onnx');
    const report = await quantizeFile(input, output);
    expect(report.bytesBefore).toBe((await stat(input)).size);
    expect(report.bytesAfter).toBe((await stat(output)).size);
    expect(Buffer.from(await readFile(output)).equals(Buffer.from(writeModel(quantizeModel(fp32).model)))).toBe(true);
    expect(readModel(await readFile(output)).graph!.node!.some((n) => n.opType === 'DynamicQuantizeMatMul')).toBe(true);
    expect((await readdir(dir)).sort()).toEqual(['model.onnx', 'model_int8.onnx']); // no temp file left

    // Refusing (already quantized) names the file and leaves nothing behind.
    await expect(quantizeFile(output, join(dir, 'again.onnx'))).rejects.toThrow(
      `${output}: the graph is already quantized`,
    );
    expect((await readdir(dir)).sort()).toEqual(['model.onnx', 'model_int8.onnx']);
  });
});
