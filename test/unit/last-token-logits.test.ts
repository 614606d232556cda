/**
 * The cut of a causal LM's graph to the answer logits at each row's last token
 * (onnx/last-token-logits.ts), on the Qwen3-Reranker stand-in: the cut graph gives the logits the
 * whole graph gives at those positions, for rows of different lengths (right-padded), and has no
 * full-vocabulary head or key/value outputs left; the same for its int8 variant, and for
 * bge-reranker-v2-gemma's head tied to the transposed embeddings, cut to one column. Where the
 * model's folder can not be written, the cut graph goes to the fallback folder and runs there. The
 * stand-in's graph with attention fused into ONNX Runtime's GroupQueryAttention (as the repository's
 * own graphs have it), cut, gives the golden yes/no logits one pair at a time and in right-padded
 * batches of rows of different lengths; quantized to int8 and cut, the golden scores within int8 rounding.
 */
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { describe, expect, inject, it } from 'vitest';
import { lastTokenGraph } from '../../src/models/yes-no-rerankers.js';
import { ortSessionOptions } from '../../src/worker/session-options.js';
import { cutToLastTokenLogits } from '../../src/onnx/last-token-logits.js';
import { readModel, toNumber, writeModel, type OnnxModel } from '../../src/onnx/model.js';
import { DataLocation } from '../../src/onnx/proto.js';
import { quantizeModel } from '../../src/quantize/graph.js';
import { output } from '../helpers/ort.js';
import { missing } from '../helpers/resources.js';

const dir = inject('standinsDir');
const repo = 'onnx-community/Qwen3-Reranker-0.6B-ONNX';
const gemma = 'BAAI/bge-reranker-v2-gemma';
const present = dir !== '' && [repo, gemma].every((r) => existsSync(join(dir, r, 'onnx', 'model.onnx')));
const answers = [4000, 3868]; // the stand-in tokenizer's "yes" and "no"
const fusedGraph = 'model_gqa.onnx';

interface GoldenPair {
  input_ids: number[];
  logits: number[];
  score: number;
}
interface Golden {
  tolerance: number;
  window: number;
  rerank: GoldenPair[];
  instructed: GoldenPair[];
}

/**
 * `rows` right-padded as the worker feeds a batch: ids, mask, positions 0.. (only when the graph
 * declares them) and each `past_key_values.*` empty, `[rows, heads, 0, head size]`.
 */
function rowFeeds(session: ort.InferenceSession, model: OnnxModel, rows: number[][]): Record<string, ort.Tensor> {
  const width = Math.max(...rows.map((row) => row.length));
  const ids = new BigInt64Array(rows.length * width);
  const mask = new BigInt64Array(rows.length * width);
  const positions = new BigInt64Array(rows.length * width);
  rows.forEach((row, r) =>
    row.forEach((id, t) => {
      ids[r * width + t] = BigInt(id);
      mask[r * width + t] = 1n;
      positions[r * width + t] = BigInt(t);
    }),
  );
  const dims = [rows.length, width];
  const result: Record<string, ort.Tensor> = {
    input_ids: new ort.Tensor('int64', ids, dims),
    attention_mask: new ort.Tensor('int64', mask, dims),
  };
  if (session.inputNames.includes('position_ids')) result.position_ids = new ort.Tensor('int64', positions, dims);
  for (const input of model.graph!.input!) {
    if (!input.name!.startsWith('past_key_values.')) continue;
    const shape = input.type!.tensorType!.shape!.dim!.map((d, i) =>
      i === 0 ? rows.length : d.dimValue !== undefined ? toNumber(d.dimValue) : 0,
    );
    result[input.name!] = new ort.Tensor('float32', new Float32Array(0), shape);
  }
  return result;
}

/** Rows of 7 and 4 tokens, right-padded: ids, mask, positions and an empty cache, as the runner feeds them. */
function feeds(model: OnnxModel): Record<string, ort.Tensor> {
  const rows = [
    [11, 12, 13, 14, 15, 16, 17],
    [21, 22, 23, 24],
  ];
  const width = 7;
  const ids = new BigInt64Array(rows.length * width);
  const mask = new BigInt64Array(rows.length * width);
  const positions = new BigInt64Array(rows.length * width);
  rows.forEach((row, r) =>
    row.forEach((id, t) => {
      ids[r * width + t] = BigInt(id);
      mask[r * width + t] = 1n;
      positions[r * width + t] = BigInt(t);
    }),
  );
  const dims = [rows.length, width];
  const result: Record<string, ort.Tensor> = {
    input_ids: new ort.Tensor('int64', ids, dims),
    attention_mask: new ort.Tensor('int64', mask, dims),
    position_ids: new ort.Tensor('int64', positions, dims),
  };
  for (const input of model.graph!.input!) {
    if (!input.name!.startsWith('past_key_values.')) continue;
    const shape = input.type!.tensorType!.shape!.dim!.map((d, i) =>
      i === 0 ? rows.length : d.dimValue !== undefined ? toNumber(d.dimValue) : 0,
    );
    result[input.name!] = new ort.Tensor('float32', new Float32Array(0), shape);
  }
  return result;
}

/** The logits of the answers at positions 6 and 3, from the whole graph's [batch, sequence, vocabulary]. */
function atLastTokens(logits: ort.Tensor, ids = answers): number[][] {
  const [, sequence, vocabulary] = logits.dims.map(Number) as [number, number, number];
  const data = logits.data as Float32Array;
  return [6, 3].map((last, row) => ids.map((id) => data[(row * sequence + last) * vocabulary + id]!));
}

async function run(
  path: string,
  model: OnnxModel,
  name = 'logits',
  options: ort.InferenceSession.SessionOptions = {},
): Promise<ort.Tensor> {
  const session = await ort.InferenceSession.create(path, options);
  try {
    return output(await session.run(feeds(model)), name);
  } finally {
    await session.release();
  }
}

/** The stand-in's graph with its external weights read in (the quantizer reads weights in the graph). */
function inlined(folder: string): OnnxModel {
  const model = readModel(readFileSync(join(folder, 'model.onnx')));
  const data = readFileSync(join(folder, 'model.onnx_data'));
  for (const t of model.graph!.initializer!) {
    if (t.dataLocation !== DataLocation.EXTERNAL) continue;
    const entry = (key: string) => t.externalData!.find((e) => e.key === key)?.value;
    const offset = Number(entry('offset') ?? 0);
    t.rawData = data.subarray(offset, offset + Number(entry('length')));
    t.externalData = [];
    t.dataLocation = DataLocation.DEFAULT;
  }
  return model;
}

describe.skipIf(missing(present, 'the yes/no reranker stand-ins could not be generated'))(
  'last-token logits cut',
  () => {
    it('gives the logits of the whole graph at each row’s last token, and nothing over the vocabulary', async () => {
      const folder = mkdtempSync(join(tmpdir(), 'onnx-gateway-cut-'));
      cpSync(join(dir, repo, 'onnx'), folder, { recursive: true });
      const whole = readModel(readFileSync(join(folder, 'model.onnx')));
      const expected = atLastTokens(await run(join(folder, 'model.onnx'), whole));

      const model = readModel(readFileSync(join(folder, 'model.onnx')));
      const cut = cutToLastTokenLogits(model, answers);
      expect(cut.head).toBe('MatMul');
      expect(model.graph!.output!.map((o) => o.name)).toEqual(['logits']);
      expect(model.graph!.input!.map((i) => i.name)).toEqual(whole.graph!.input!.map((i) => i.name));
      writeFileSync(join(folder, 'cut.onnx'), writeModel(model));
      const logits = await run(join(folder, 'cut.onnx'), model);
      expect(logits.dims).toEqual([2, 2]);
      const got = Array.from(logits.data as Float32Array);
      expected.flat().forEach((value, i) => expect(got[i]).toBeCloseTo(value, 5));
    });

    it('cuts the int8 variant’s DynamicQuantizeMatMul head to the same logits, within int8 rounding', async () => {
      const folder = mkdtempSync(join(tmpdir(), 'onnx-gateway-cut-'));
      const { model: quantized } = quantizeModel(inlined(join(dir, repo, 'onnx')));
      writeFileSync(join(folder, 'model_int8.onnx'), writeModel(quantized));
      const expected = atLastTokens(await run(join(folder, 'model_int8.onnx'), quantized));

      const model = readModel(readFileSync(join(folder, 'model_int8.onnx')));
      expect(cutToLastTokenLogits(model, answers).head).toBe('DynamicQuantizeMatMul');
      writeFileSync(join(folder, 'cut.onnx'), writeModel(model));
      const got = Array.from((await run(join(folder, 'cut.onnx'), model)).data as Float32Array);
      // The activation's int8 scale is taken over the rows it sees: all positions whole, the last ones cut.
      const scale = Math.max(...expected.flat().map(Math.abs));
      expected.flat().forEach((value, i) => expect(Math.abs(got[i]! - value)).toBeLessThan(0.05 * scale));
    });

    it('refuses a graph without the output or the attention mask', () => {
      const model = readModel(readFileSync(join(dir, repo, 'onnx', 'model.onnx')));
      expect(() => cutToLastTokenLogits(model, answers, 'scores')).toThrow(/no output "scores"/);
      model.graph!.input = model.graph!.input!.filter((i) => i.name !== 'attention_mask');
      expect(() => cutToLastTokenLogits(model, answers)).toThrow(/no "attention_mask" input/);
    });

    it('cuts a head tied to the transposed embedding table (bge-reranker-v2-gemma) to the one logit of "Yes"', async () => {
      const folder = mkdtempSync(join(tmpdir(), 'onnx-gateway-cut-'));
      cpSync(join(dir, gemma, 'onnx'), folder, { recursive: true });
      const yes = [4067]; // the stand-in tokenizer's "Yes"
      const whole = readModel(readFileSync(join(folder, 'model.onnx')));
      const expected = atLastTokens(await run(join(folder, 'model.onnx'), whole), yes);
      const model = readModel(readFileSync(join(folder, 'model.onnx')));
      expect(cutToLastTokenLogits(model, yes).head).toBe('MatMul');
      // The transposed table is no longer read: only its one row, gathered.
      expect(
        model.graph!.node!.filter((n) => n.opType === 'Transpose' && n.output![0]!.startsWith('last_token')),
      ).toHaveLength(1);
      writeFileSync(join(folder, 'cut.onnx'), writeModel(model));
      const logits = await run(join(folder, 'cut.onnx'), model);
      expect(logits.dims).toEqual([2, 1]);
      const got = Array.from(logits.data as Float32Array);
      expected.flat().forEach((value, i) => expect(got[i]).toBeCloseTo(value, 5));
    });

    it('writes the cut graph to the fallback folder when the model folder can not be written, and it runs there', async () => {
      const models = mkdtempSync(join(tmpdir(), 'onnx-gateway-cut-'));
      const folder = join(models, 'onnx');
      cpSync(join(dir, repo, 'onnx'), folder, { recursive: true });
      // Read-only for others; root writes through modes, so the partial file's path is taken too.
      mkdirSync(join(folder, `model.answers-${answers.join('-')}.onnx.partial`));
      chmodSync(folder, 0o555);
      const before = readdirSync(folder).sort();
      const fallback = mkdtempSync(join(tmpdir(), 'onnx-gateway-data-'));
      try {
        const cut = lastTokenGraph(join(folder, 'model.onnx'), answers, fallback);
        expect(cut.path.startsWith(fallback)).toBe(true);
        expect(cut.externalDataDir).toBe(folder);
        expect(readdirSync(folder).sort()).toEqual(before);
        expect(readdirSync(join(cut.path, '..'))).toEqual([`model.answers-${answers.join('-')}.onnx`]);
        // The session reads the weights from the graph's folder, as the worker opens it.
        const whole = readModel(readFileSync(join(folder, 'model.onnx')));
        const expected = atLastTokens(await run(join(folder, 'model.onnx'), whole));
        const single = { intraOpThreads: 1, spinning: false, memoryArena: false };
        const options = ortSessionOptions(single, 'cpu', cut.externalDataDir);
        const got = Array.from((await run(cut.path, whole, 'logits', options)).data as Float32Array);
        expected.flat().forEach((value, i) => expect(got[i]).toBeCloseTo(value, 5));
        // Kept while newer than the graph: the next load reads it as it is.
        const written = statSync(cut.path).mtimeMs;
        expect(lastTokenGraph(join(folder, 'model.onnx'), answers, fallback)).toEqual(cut);
        expect(statSync(cut.path).mtimeMs).toBe(written);
        // Without a fallback folder, the failure to write is the load's.
        expect(() => lastTokenGraph(join(folder, 'model.onnx'), answers)).toThrow();
      } finally {
        chmodSync(folder, 0o755);
      }
    });

    describe('a graph with fused GroupQueryAttention', () => {
      const golden = () => JSON.parse(readFileSync(join(dir, repo, 'golden.json'), 'utf8')) as Golden;

      it('is cut to the golden yes/no logits, one pair at a time and in right-padded batches', async () => {
        const folder = mkdtempSync(join(tmpdir(), 'onnx-gateway-cut-'));
        cpSync(join(dir, repo, 'onnx', fusedGraph), join(folder, fusedGraph));
        const whole = readModel(readFileSync(join(folder, fusedGraph)));
        const fused = whole.graph!.node!.filter((n) => n.opType === 'GroupQueryAttention');
        expect(fused.length).toBeGreaterThan(0);
        expect(fused.every((n) => n.domain === 'com.microsoft')).toBe(true);
        // Positions come from the attention mask (seqlens_k), not from an input.
        expect(whole.graph!.input!.map((i) => i.name)).not.toContain('position_ids');

        const cut = lastTokenGraph(join(folder, fusedGraph), answers);
        expect(cut).toEqual({ path: join(folder, `model_gqa.answers-${answers.join('-')}.onnx`) });
        const model = readModel(readFileSync(cut.path));
        expect(model.graph!.output!.map((o) => o.name)).toEqual(['logits']);
        expect(model.graph!.node!.filter((n) => n.opType === 'GroupQueryAttention')).toHaveLength(fused.length);
        // No head over the vocabulary: the head's weight is read only through a Gather of the answers'
        // columns (folded at load), and the key/value outputs are gone.
        const readers = model.graph!.node!.filter((n) => n.input!.includes('lm_head.weight'));
        expect(readers.map((n) => n.opType)).toEqual(['Gather']);
        const vocabulary = toNumber(whole.graph!.initializer!.find((t) => t.name === 'lm_head.weight')!.dims![1]);
        expect(vocabulary).toBeGreaterThan(1000);
        expect(whole.graph!.output!.map((o) => o.name)).toContain('present.0.key');

        const { tolerance, window, rerank, instructed } = golden();
        const pairs = [...rerank, ...instructed];
        const session = await ort.InferenceSession.create(cut.path);
        try {
          const logits = async (rows: number[][]) => {
            const out = output(await session.run(rowFeeds(session, model, rows)), 'logits');
            expect(out.dims).toEqual([rows.length, answers.length]);
            return Array.from(out.data as Float32Array);
          };
          let worst = 0;
          for (const pair of pairs) {
            const got = await logits([pair.input_ids]);
            pair.logits.forEach((value, i) => (worst = Math.max(worst, Math.abs(got[i]! - value))));
          }
          expect(worst).toBeLessThanOrEqual(tolerance);
          // Rows of different lengths together, right-padded: each row's last real token is read.
          const short = pairs.filter((p) => p.input_ids.length < window);
          expect(new Set(short.map((p) => p.input_ids.length)).size).toBeGreaterThan(2);
          for (const batch of [short, [...short].reverse(), short.slice(0, 3)]) {
            const got = await logits(batch.map((p) => p.input_ids));
            batch.forEach((pair, r) =>
              pair.logits.forEach((value, i) =>
                expect(Math.abs(got[r * answers.length + i]! - value), `row ${r}`).toBeLessThanOrEqual(tolerance),
              ),
            );
          }
        } finally {
          await session.release();
        }
      });

      it('is quantized to int8 (as the repository’s model_quantized.onnx) and cut, its scores within int8 rounding', async () => {
        const folder = mkdtempSync(join(tmpdir(), 'onnx-gateway-cut-'));
        const { model } = quantizeModel(readModel(readFileSync(join(dir, repo, 'onnx', fusedGraph))));
        expect(cutToLastTokenLogits(model, answers).head).toBe('DynamicQuantizeMatMul');
        expect(model.graph!.node!.some((n) => n.opType === 'GroupQueryAttention')).toBe(true);
        writeFileSync(join(folder, 'cut.onnx'), writeModel(model));
        const { rerank, instructed } = golden();
        const session = await ort.InferenceSession.create(join(folder, 'cut.onnx'));
        let worst = 0;
        try {
          for (const pair of [...rerank, ...instructed]) {
            const out = output(await session.run(rowFeeds(session, model, [pair.input_ids])), 'logits');
            const [yes, no] = Array.from(out.data as Float32Array) as [number, number];
            worst = Math.max(worst, Math.abs(1 / (1 + Math.exp(no - yes)) - pair.score));
          }
        } finally {
          await session.release();
        }
        // Activations quantized at run time, as the unfused graph's int8 variant: 0.0044 on these pairs.
        expect(worst).toBeGreaterThan(0);
        expect(worst).toBeLessThan(0.02);
      });
    });
  },
);
