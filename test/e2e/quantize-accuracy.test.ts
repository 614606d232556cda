/**
 * int8 accuracy on the real-size synthetic MiniLM models, against the float64
 * golden numbers: quantizes both models as `models quantize` does (GPTQ, calibrated
 * on the shipped text; the graphs kept in .data while the code and the models are
 * unchanged) and runs golden token ids through onnxruntime directly (no tokenizer,
 * no server). Their speed, fp32 against int8,
 * is measured by the bench (bench/ceiling.ts sweeps the int8 variants).
 */
import { existsSync } from 'node:fs';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_CALIBRATION_FILE } from '../../src/quantize/calibration-inputs.js';
import { quantizeToInt8 } from '../../src/quantize/int8-variant.js';
import type { QuantizeReport } from '../../src/quantize/graph.js';
import { formatQuantizeReport } from '../../src/quantize/report.js';
import { madeOnce } from '../helpers/made-once.js';
import { output } from '../helpers/ort.js';
import { missing } from '../helpers/resources.js';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const modelsDir = resolve(repoRoot, process.env.ONNX_GATEWAY_MODELS_DIR ?? '.data/models');
const EMBEDDER = join(modelsDir, 'synthetic-all-MiniLM-L6-v2');
const RERANKER = join(modelsDir, 'synthetic-ms-marco-MiniLM-L-6-v2');
const SKIP_REASON = 'needs the synthetic models: python3 ../shared/models/synthetic/make_models.py --out .data/models';
const available = !missing(
  [EMBEDDER, RERANKER].every(
    (dir) => existsSync(join(dir, 'onnx', 'model.onnx')) && existsSync(join(dir, 'golden.json')),
  ),
  SKIP_REASON,
);

interface GoldenText {
  text: string;
  input_ids: number[];
  normalized: number[];
}
interface GoldenPair {
  query: string;
  input_ids: number[];
  token_type_ids: number[];
  query_tokens: number;
  document_tokens: number;
  logit: number;
  score: number;
}

type Variant = 'fp32' | 'int8';

/** The golden pairs' queries crossed with their documents: 64 pairs, [CLS] q [SEP] d [SEP], cut to 512. */
function crossPairs(pairs: GoldenPair[]): { input_ids: number[]; token_type_ids: number[] }[] {
  const queries = pairs.map((p) => p.input_ids.slice(1, 1 + p.query_tokens));
  const documents = pairs.map((p) => p.input_ids.slice(2 + p.query_tokens, 2 + p.query_tokens + p.document_tokens));
  return queries.flatMap((q) =>
    documents.map((d) => {
      const input_ids = [CLS, ...q, SEP, ...d.slice(0, 512 - 3 - q.length), SEP];
      return { input_ids, token_type_ids: input_ids.map((_, i) => (i < q.length + 2 ? 0 : 1)) };
    }),
  );
}
const CLS = 101;
const SEP = 102;

// --- running ---------------------------------------------------------------------

/** int64 feeds for rows of ids, right-padded with 0 ([PAD]) and mask 0. */
function feeds(rows: number[][], typeRows?: number[][]): Record<string, ort.Tensor> {
  const seq = Math.max(...rows.map((r) => r.length));
  const ids = new BigInt64Array(rows.length * seq);
  const mask = new BigInt64Array(rows.length * seq);
  const types = new BigInt64Array(rows.length * seq);
  rows.forEach((row, r) =>
    row.forEach((id, j) => {
      ids[r * seq + j] = BigInt(id);
      mask[r * seq + j] = 1n;
      types[r * seq + j] = BigInt(typeRows?.[r]![j] ?? 0);
    }),
  );
  const dims = [rows.length, seq];
  return {
    input_ids: new ort.Tensor('int64', ids, dims),
    attention_mask: new ort.Tensor('int64', mask, dims),
    token_type_ids: new ort.Tensor('int64', types, dims),
  };
}

/** Mask-weighted mean of last_hidden_state, L2-normalised, one vector per row. */
async function embed(session: ort.InferenceSession, rows: number[][]): Promise<Float32Array[]> {
  const out = output(await session.run(feeds(rows)), 'last_hidden_state');
  const [, seq, width] = out.dims as readonly [number, number, number];
  const hidden = out.data as Float32Array;
  return rows.map((row, r) => {
    const v = new Float64Array(width);
    for (let j = 0; j < row.length; j++) for (let h = 0; h < width; h++) v[h]! += hidden[(r * seq + j) * width + h]!;
    const norm = Math.hypot(...v);
    return Float32Array.from(v, (x) => x / norm);
  });
}

async function scores(
  session: ort.InferenceSession,
  pairs: { input_ids: number[]; token_type_ids: number[] }[],
): Promise<number[]> {
  const logits = output(
    await session.run(
      feeds(
        pairs.map((p) => p.input_ids),
        pairs.map((p) => p.token_type_ids),
      ),
    ),
    'logits',
  );
  return [...(logits.data as Float32Array)].map((x) => 1 / (1 + Math.exp(-x)));
}

const embedOne = async (session: ort.InferenceSession, ids: number[]) => (await embed(session, [ids]))[0]!;
const scoreOne = async (session: ort.InferenceSession, pair: { input_ids: number[]; token_type_ids: number[] }) =>
  (await scores(session, [pair]))[0]!;

const dot = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
};
const maxAbsDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i]! - b[i]!));
  return d;
};

// --- tests -----------------------------------------------------------------------

describe.skipIf(!available)(
  `int8 quantization of the synthetic MiniLM models${available ? '' : ` (skipped: ${SKIP_REASON})`}`,
  () => {
    let texts: GoldenText[];
    let pairs: GoldenPair[];
    const reports = {} as Record<'embedder' | 'reranker', QuantizeReport>;
    const paths = {} as Record<'embedder' | 'reranker', Record<Variant, string>>;
    const sessions = {} as Record<'embedder' | 'reranker', Record<Variant, ort.InferenceSession>>;
    /** The reranker rounded to nearest (no calibration), to compare with. */
    let nearest: ort.InferenceSession;
    // One thread and the engine's optimisation level: what a worker runs.
    const options: ort.InferenceSession.SessionOptions = {
      intraOpNumThreads: 1,
      interOpNumThreads: 1,
      graphOptimizationLevel: 'all',
    };

    beforeAll(async () => {
      texts = (JSON.parse(await readFile(join(EMBEDDER, 'golden.json'), 'utf8')) as { items: GoldenText[] }).items;
      pairs = (JSON.parse(await readFile(join(RERANKER, 'golden.json'), 'utf8')) as { items: GoldenPair[] }).items;
      const models = [
        ['embedder', EMBEDDER],
        ['reranker', RERANKER],
      ] as const;
      // Calibrating and GPTQ take ~20 s per model on 2 cores: the int8 graphs and their reports are
      // made once per version of the code, the calibration text and the fp32 models.
      const made = await madeOnce(
        {
          name: 'int8-synthetic-minilm',
          sources: [
            join(repoRoot, 'src'),
            DEFAULT_CALIBRATION_FILE,
            ...models.flatMap(([, folder]) =>
              ['onnx/model.onnx', 'tokenizer.json', 'tokenizer_config.json', 'config.json'].map((file) =>
                join(folder, file),
              ),
            ),
          ],
        },
        async (out) => {
          const byKind = {} as Record<string, QuantizeReport>;
          for (const [kind, folder] of models) {
            const input = join(folder, 'onnx', 'model.onnx');
            byKind[kind] = await quantizeToInt8({
              input,
              output: join(out, `${kind}.int8.onnx`),
              tokenizerDir: folder,
            });
          }
          await quantizeToInt8(
            {
              input: join(RERANKER, 'onnx', 'model.onnx'),
              output: join(out, 'reranker.nearest.onnx'),
              tokenizerDir: RERANKER,
            },
            { calibration: false },
          );
          await writeFile(join(out, 'reports.json'), JSON.stringify(byKind));
        },
      );
      Object.assign(reports, JSON.parse(await readFile(join(made, 'reports.json'), 'utf8')));
      for (const [kind, folder] of models) {
        console.log(`${kind}: ${formatQuantizeReport(reports[kind]).replaceAll('\n', '; ')}`);
        paths[kind] = { fp32: join(folder, 'onnx', 'model.onnx'), int8: join(made, `${kind}.int8.onnx`) };
        sessions[kind] = {
          fp32: await ort.InferenceSession.create(paths[kind].fp32, options),
          int8: await ort.InferenceSession.create(paths[kind].int8, options),
        };
      }
      nearest = await ort.InferenceSession.create(join(made, 'reranker.nearest.onnx'), options);
    }, 300_000);

    afterAll(async () => {
      await nearest?.release();
      for (const pair of Object.values(sessions)) for (const s of Object.values(pair)) await s.release();
    });

    it('converts the 36 encoder MatMuls (+ pooler and classifier) with their biases, GPTQ-rounded on the shipped text, and shrinks the file by a third', async () => {
      // 6 layers x (Q, K, V, attention output, FFN in, FFN out)
      expect(reports.embedder.converted).toHaveLength(36);
      expect(reports.reranker.converted).toHaveLength(38);
      for (const report of Object.values(reports)) {
        expect(report.converted.every((c) => c.biasFolded && c.rounding === 'gptq')).toBe(true);
        expect(report.calibration?.source).toBe(DEFAULT_CALIBRATION_FILE);
        expect(report.calibration!.tokens).toBeGreaterThan(4000);
        // attention scores and context (activation x activation) stay float
        expect(report.skipped).toHaveLength(12);
        expect(report.bytesAfter).toBeLessThan(report.bytesBefore * 0.7);
      }
      for (const kind of ['embedder', 'reranker'] as const) {
        expect((await stat(paths[kind].int8)).size).toBe(reports[kind].bytesAfter);
        expect((await stat(paths[kind].fp32)).size).toBe(reports[kind].bytesBefore);
      }
    });

    it('embedder: every int8 vector keeps cosine >= 0.999 to golden', async () => {
      const cosines: number[] = [];
      for (const item of texts) {
        cosines.push(dot(await embedOne(sessions.embedder.int8, item.input_ids), item.normalized));
      }
      const worst = cosines.indexOf(Math.min(...cosines));
      console.log(
        `embedder int8: cosine to golden min ${cosines[worst]!.toFixed(6)} (${texts[worst]!.input_ids.length} tokens), mean ${(cosines.reduce((a, b) => a + b) / cosines.length).toFixed(6)}`,
      );
      for (const [i, c] of cosines.entries())
        expect(c, `text ${i}: ${texts[i]!.text.slice(0, 40)}`).toBeGreaterThanOrEqual(0.999);
    });

    // Measured (the shipped calibration text, and four subsets of it): golden pairs within
    // 0.007-0.014 of golden, mean error under 0.002; rounding to nearest: up to 0.018, every logit
    // shifted down (mean score error -0.012). The 0.01 per pair that one would like is not reachable
    // robustly by any rounding of the weights: the kernel also quantizes each activation at run
    // time (uint8, one scale per tensor), and that alone moves these scores by up to ~0.018 (pair
    // 4) with weights exactly on the int8 grid; which pairs it hits changes with any change to the
    // weights. So the per-pair bound is loose, and the error's bias and spread, where GPTQ does
    // its work, are checked on 64 pairs below.
    it('reranker: int8 scores within 0.02 of golden, unbiased, ranking kept where golden margins exceed 0.01', async () => {
      const got: number[] = [];
      for (const pair of pairs) got.push(...(await scores(sessions.reranker.int8, [pair])));
      const diffs = got.map((s, i) => s - pairs[i]!.score);
      const mean = diffs.reduce((a, b) => a + b) / diffs.length;
      console.log(
        `reranker int8: max |score - golden| ${Math.max(...diffs.map(Math.abs)).toFixed(5)}, mean ${mean.toFixed(5)}, scores ${got.map((s) => s.toFixed(4)).join(' ')}`,
      );
      for (const [i, d] of diffs.entries()) expect(Math.abs(d), `pair ${i}`).toBeLessThanOrEqual(0.02);
      expect(Math.abs(mean)).toBeLessThanOrEqual(0.005);
      for (let i = 0; i < pairs.length; i++) {
        for (let j = 0; j < pairs.length; j++) {
          if (pairs[i]!.score - pairs[j]!.score > 0.01)
            expect(got[i], `pair ${i} above pair ${j}`).toBeGreaterThan(got[j]!);
        }
      }
    });

    // Measured over the 64 pairs: GPTQ rms 0.005-0.0063, mean within 0.0015; to nearest rms 0.0108,
    // mean -0.0083. The kernel's activation rounding alone (weights on the grid) gives rms ~0.0045.
    it('reranker: over 64 query x document pairs, GPTQ removes the bias of rounding to nearest and cuts its rms error by over a quarter', async () => {
      const crossed = crossPairs(pairs);
      const stats = async (session: ort.InferenceSession) => {
        const d: number[] = [];
        for (const pair of crossed) {
          d.push((await scoreOne(session, pair)) - (await scoreOne(sessions.reranker.fp32, pair)));
        }
        return {
          rms: Math.sqrt(d.reduce((s, x) => s + x * x, 0) / d.length),
          mean: d.reduce((s, x) => s + x, 0) / d.length,
          max: Math.max(...d.map(Math.abs)),
        };
      };
      const [gptq, plain] = [await stats(sessions.reranker.int8), await stats(nearest)];
      const show = (s: typeof gptq) => `rms ${s.rms.toFixed(5)}, mean ${s.mean.toFixed(5)}, max ${s.max.toFixed(5)}`;
      console.log(`reranker int8 vs fp32 over ${crossed.length} pairs: GPTQ ${show(gptq)}; to nearest ${show(plain)}`);
      expect(gptq.rms).toBeLessThanOrEqual(0.008);
      expect(Math.abs(gptq.mean)).toBeLessThanOrEqual(0.003);
      expect(gptq.rms).toBeLessThan(0.75 * plain.rms);
    });

    it('int8 results depend on the batch (activation scales span it) but one-input runs are exactly reproducible', async () => {
      // Short and medium texts, so the padded batch stays cheap.
      const rows = texts
        .map((t) => t.input_ids)
        .filter((ids) => ids.length <= 64)
        .slice(0, 5);
      const diffs = {} as Record<Variant, number>;
      for (const variant of ['fp32', 'int8'] as const) {
        const session = sessions.embedder[variant];
        const batched = await embed(session, rows);
        diffs[variant] = 0;
        for (const [i, row] of rows.entries()) {
          const inBatch = batched[i]!;
          const alone = await embedOne(session, row);
          diffs[variant] = Math.max(diffs[variant], maxAbsDiff(alone, inBatch));
          const again = await embedOne(session, row);
          expect(maxAbsDiff(alone, again), `${variant}: run to run`).toBeLessThanOrEqual(1e-6);
          // Still accurate in a batch, just not bit-identical to the one-input run.
          expect(dot(inBatch, alone)).toBeGreaterThan(0.999);
        }
      }
      console.log(
        `batch of ${rows.length} (lengths ${rows.map((r) => r.length).join(', ')}) vs one at a time, max |diff| of normalized vectors: fp32 ${diffs.fp32.toExponential(2)}, int8 ${diffs.int8.toExponential(2)}`,
      );
      // The graph masks padded keys, so in float32 a row does not depend on its batch.
      expect(diffs.fp32).toBeLessThan(1e-5);
      // int8 usually differs (that is why the engine runs int8 one input per batch); not asserted,
      // as a batch whose extra rows do not widen any activation range would give identical rows.
    });
  },
);
