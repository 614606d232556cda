/**
 * Ceiling: raw onnxruntime-node in one process, no HTTP, no queue, no tokenising in the timed loop.
 *
 * Same model and the same pre-tokenised mix (bench/mix.ts), sorted by length and cut into batches
 * padded to their longest member. Sweep: batch size x concurrently running sessions (each in its own
 * worker thread) x intra-op threads per session (sessions x threads <= cores), and session options
 * (memory arena on/off, intra-op spinning). Reports inputs/s, tokens/s, achieved GFLOP/s against the
 * machine's fp32 MatMul peak measured with ORT itself, the best configuration, and the latency of one
 * input run alone (per length bucket and over the mix), the reference for the servers' concurrency-1 p50.
 */
import type * as ort from 'onnxruntime-node';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type Worker } from 'node:worker_threads';
import {
  DEFAULT_EMBED_MODEL,
  DEFAULT_RERANK_MODEL,
  type Spread,
  flagList,
  flagNumber,
  flagNumbers,
  log,
  machineInfo,
  median,
  modelDir,
  modelOnnxPath,
  nowMs,
  parseFlags,
  percentile,
  readJson,
  round,
  roundSpread,
  spread,
  startWorker,
} from './lib/common.js';
import { bertFlopsBatch, bertFlopsPerToken, matmulModel } from './lib/onnx-matmul.js';
import {
  type Encoded,
  type LengthStats,
  LENGTH_BUCKETS,
  bucketOf,
  embeddingMix,
  lengthStats,
  rerankMix,
  tokenizeMix,
  tokenizePairs,
} from './mix.js';
import type { Batch, BertBatch, FromWorker, ToWorker, WorkerInit } from './ceiling-worker.js';

const WORKER_URL = new URL(`./ceiling-worker${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url);

// ---------------------------------------------------------------------------------------------
// A group of sessions, one per worker thread, sharing one atomic work counter.

export class SessionGroup {
  private constructor(
    private readonly workers: Worker[],
    private readonly inbox: Array<Array<(m: FromWorker) => void>>,
    readonly loadMs: number,
  ) {}

  static async start(init: WorkerInit, count: number): Promise<SessionGroup> {
    const workers: Worker[] = [];
    const inbox: Array<Array<(m: FromWorker) => void>> = [];
    const ready: Array<Promise<FromWorker>> = [];
    for (let w = 0; w < count; w++) {
      const worker = startWorker(WORKER_URL, { workerData: init });
      const waiters: Array<(m: FromWorker) => void> = [];
      inbox.push(waiters);
      worker.on('message', (m: FromWorker) => {
        if (m.type === 'error') {
          log(`ceiling worker error: ${m.message}`);
        }
        const next = waiters.shift();
        if (next) next(m);
      });
      worker.on('error', (e) => {
        log(`ceiling worker crashed: ${e.stack ?? e.message}`);
        const next = waiters.shift();
        if (next) next({ type: 'error', message: e.message });
      });
      ready.push(new Promise((r) => waiters.push(r)));
      workers.push(worker);
    }
    const msgs = await Promise.all(ready);
    const bad = msgs.find((m) => m.type === 'error');
    const group = new SessionGroup(workers, inbox, Math.max(...msgs.map((m) => (m.type === 'ready' ? m.loadMs : 0))));
    if (bad && bad.type === 'error') {
      await group.close();
      throw new Error(bad.message);
    }
    return group;
  }

  private ask(w: number, msg: ToWorker): Promise<FromWorker> {
    const p = new Promise<FromWorker>((r) => this.inbox[w]!.push(r));
    this.workers[w]!.postMessage(msg);
    return p;
  }

  private static check(msgs: FromWorker[]): void {
    const bad = msgs.find((m) => m.type === 'error');
    if (bad && bad.type === 'error') throw new Error(bad.message);
  }

  async load(batches: Batch[], warmup: number[]): Promise<void> {
    SessionGroup.check(await Promise.all(this.workers.map((_, w) => this.ask(w, { type: 'load', batches, warmup }))));
  }

  /** Run `total` batch indexes from `offset` (modulo the loaded list) over all sessions; wall time measured here. */
  async run(total: number, offset = 0): Promise<{ wallMs: number; runs: Array<[number, number]> }> {
    const counter = new SharedArrayBuffer(4);
    const t0 = nowMs();
    const msgs = await Promise.all(this.workers.map((_, w) => this.ask(w, { type: 'go', counter, total, offset })));
    const wallMs = nowMs() - t0;
    SessionGroup.check(msgs);
    return { wallMs, runs: msgs.flatMap((m) => (m.type === 'done' ? m.runs : [])) };
  }

  async close(): Promise<void> {
    await Promise.all(
      this.workers.map(async (w) => {
        w.postMessage({ type: 'close' } satisfies ToWorker);
        await new Promise((r) => setTimeout(r, 50));
        await w.terminate();
      }),
    );
  }
}

// ---------------------------------------------------------------------------------------------
// Batches

export function packBatches(enc: readonly Encoded[], batchSize: number, padId = 0): BertBatch[] {
  const sorted = [...enc].sort((a, b) => a.ids.length - b.ids.length);
  const out: BertBatch[] = [];
  for (let s = 0; s < sorted.length; s += batchSize) {
    const rows = sorted.slice(s, s + batchSize);
    const seq = Math.max(...rows.map((r) => r.ids.length));
    const ids = new Int32Array(rows.length * seq).fill(padId);
    const typeIds = new Int32Array(rows.length * seq);
    const lengths = new Int32Array(rows.length);
    rows.forEach((r, i) => {
      ids.set(r.ids, i * seq);
      typeIds.set(r.typeIds, i * seq);
      lengths[i] = r.ids.length;
    });
    out.push({ kind: 'bert', count: rows.length, seq, ids, typeIds, lengths });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Types of the result

export interface SessionVariant {
  arena: boolean;
  spinning: '0' | '1' | null;
}

export interface CeilingPoint {
  workload: 'embed' | 'rerank';
  model: string;
  sessions: number;
  threads: number;
  batch: number;
  arena: boolean;
  spinning: '0' | '1' | null;
  /** inputs/s (pairs/s for rerank) */
  inputsPerSec: Spread;
  tokensPerSec: Spread;
  /** achieved GFLOP/s counting the padded work ORT actually did */
  gflops: Spread;
  /** share of computed tokens that were padding */
  paddingShare: number;
}

export interface SingleLatency {
  sessions: 1;
  threads: number;
  /** median latency of one input run alone over the whole mix, ms */
  medianMs: number;
  p90Ms: number;
  meanMs: number;
  byBucket: Record<string, { n: number; medianMs: number }>;
}

export interface MatmulPeak {
  sessions: number;
  threads: number;
  size: number;
  gflops: Spread;
  bestRunGflops: number;
}

export interface CeilingResult {
  embedModel: string;
  rerankModel: string;
  mix: LengthStats;
  rerankPairs: LengthStats;
  modelConfig: { hidden: number; layers: number; intermediate: number; heads: number };
  flopsPerToken: { formula: string; atSeq128: number; atMeanLength: number; meanLength: number };
  matmul: MatmulPeak[];
  matmulPeakGflops: number;
  embed: CeilingPoint[];
  rerank: CeilingPoint[];
  bestEmbed: CeilingPoint | null;
  bestRerank: CeilingPoint | null;
  singleLatency: SingleLatency[];
  /** The same sweeps on the int8 variants (batch 1: int8 results depend on their batch otherwise), when run. */
  int8: {
    embedModel: string;
    rerankModel: string;
    embed: CeilingPoint[];
    rerank: CeilingPoint[];
    bestEmbed: CeilingPoint | null;
    bestRerank: CeilingPoint | null;
    singleLatency: SingleLatency[];
  } | null;
  notes: string[];
}

export interface CeilingOptions {
  embedModel: string;
  rerankModel: string;
  n: number;
  batchSizes: number[];
  sessions: number[];
  threads: number[];
  /** batch sizes at which the non-default session options are tried */
  optionBatches: number[];
  rerankRequests: number;
  rerankBatchSizes: number[];
  repeats: number;
  matmulSize: number;
  matmulRuns: number;
  cores: number;
  /** Also sweep the int8 variants (`<id>:int8`) at these batch sizes; none: fp32 only. */
  int8BatchSizes: number[];
}

/** 1, 2, 4, ... up to `cores`. */
function powersOfTwo(cores: number): number[] {
  const out: number[] = [];
  for (let n = 1; n <= cores; n *= 2) out.push(n);
  return out;
}

export function ceilingDefaults(quick: boolean, cores: number): CeilingOptions {
  // On a larger machine the layouts that can win are the ones that use every core, and one session
  // of more threads for one input alone (layouts() keeps those).
  const counts = powersOfTwo(Math.max(2, cores));
  return quick
    ? {
        embedModel: DEFAULT_EMBED_MODEL,
        rerankModel: DEFAULT_RERANK_MODEL,
        n: 64,
        batchSizes: [1, 4, 16],
        sessions: counts,
        threads: counts,
        optionBatches: [1],
        rerankRequests: 1,
        rerankBatchSizes: [1, 8],
        repeats: 1,
        matmulSize: 1024,
        matmulRuns: 6,
        cores,
        int8BatchSizes: [1],
      }
    : {
        embedModel: DEFAULT_EMBED_MODEL,
        rerankModel: DEFAULT_RERANK_MODEL,
        n: 256,
        batchSizes: [1, 2, 4, 8, 16, 32],
        sessions: counts,
        threads: counts,
        optionBatches: [1, 8],
        rerankRequests: 4,
        rerankBatchSizes: [1, 2, 4, 8, 16, 32],
        repeats: 3,
        matmulSize: 1024,
        matmulRuns: 24,
        cores,
        int8BatchSizes: [1],
      };
}

export function sessionOptions(
  threads: number,
  v: SessionVariant,
  device?: string,
): ort.InferenceSession.SessionOptions {
  const o: ort.InferenceSession.SessionOptions = {
    ...(device ? { executionProviders: [device] } : {}),
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    enableCpuMemArena: v.arena,
    logSeverityLevel: 3,
  };
  // Flattened by the Node binding into the config entry `session.intra_op.allow_spinning`.
  if (v.spinning !== null) o.extra = { session: { intra_op: { allow_spinning: v.spinning } } };
  return o;
}

function layouts(opts: CeilingOptions): Array<{ sessions: number; threads: number }> {
  const out: Array<{ sessions: number; threads: number }> = [];
  for (const s of opts.sessions)
    for (const t of opts.threads)
      if (s * t <= opts.cores && (s === 1 || s * t * 2 > opts.cores)) out.push({ sessions: s, threads: t });
  return out;
}

function variants(threads: number): SessionVariant[] {
  // ORT's default is spinning on ('1'); with one intra-op thread there is no pool to spin.
  const spins: Array<'0' | '1' | null> = threads > 1 ? ['1', '0'] : [null];
  return [true, false].flatMap((arena) => spins.map((spinning) => ({ arena, spinning })));
}

const isBaseline = (v: SessionVariant): boolean => v.arena && (v.spinning === null || v.spinning === '1');

// ---------------------------------------------------------------------------------------------

async function measureMatmul(opts: CeilingOptions): Promise<MatmulPeak[]> {
  const n = opts.matmulSize;
  const model = matmulModel(n, n, n);
  const a = new Float32Array(n * n);
  const b = new Float32Array(n * n);
  for (let i = 0; i < a.length; i++) {
    a[i] = Math.sin(i) * 0.5;
    b[i] = Math.cos(i) * 0.5;
  }
  const feed: Batch = { kind: 'raw', tensors: { A: { data: a, dims: [n, n] }, B: { data: b, dims: [n, n] } } };
  const flops = 2 * n * n * n;
  const out: MatmulPeak[] = [];
  for (const { sessions, threads } of layouts(opts)) {
    const group = await SessionGroup.start(
      { model, options: sessionOptions(threads, { arena: true, spinning: null }) },
      sessions,
    );
    try {
      await group.load([feed], [0, 0]);
      const rates: number[] = [];
      let bestRun = 0;
      for (let r = 0; r < Math.max(opts.repeats, 1); r++) {
        const { wallMs, runs } = await group.run(opts.matmulRuns);
        rates.push((opts.matmulRuns * flops) / (wallMs / 1000) / 1e9);
        if (sessions === 1) for (const [, ms] of runs) bestRun = Math.max(bestRun, flops / (ms / 1000) / 1e9);
      }
      const p: MatmulPeak = {
        sessions,
        threads,
        size: n,
        gflops: roundSpread(spread(rates), 1),
        bestRunGflops: round(bestRun, 1),
      };
      log(`  matmul ${n}^3  ${sessions} session(s) x ${threads} thread(s): ${p.gflops.median} GFLOP/s`);
      out.push(p);
    } finally {
      await group.close();
    }
  }
  return out;
}

interface SweepInput {
  workload: 'embed' | 'rerank';
  model: string;
  encoded: Encoded[];
  batchSizes: number[];
  optionBatches: number[];
  cfg: { hidden: number; layers: number; intermediate: number };
}

async function sweep(
  opts: CeilingOptions,
  input: SweepInput,
  latencies: SingleLatency[] | null,
): Promise<CeilingPoint[]> {
  const points: CeilingPoint[] = [];
  const realTokens = input.encoded.reduce((acc, e) => acc + e.ids.length, 0);
  const modelPath = modelOnnxPath(input.model);
  for (const { sessions, threads } of layouts(opts)) {
    for (const v of variants(threads)) {
      const sizes = isBaseline(v) ? input.batchSizes : input.batchSizes.filter((b) => input.optionBatches.includes(b));
      if (sizes.length === 0) continue;
      const group = await SessionGroup.start({ model: modelPath, options: sessionOptions(threads, v) }, sessions);
      try {
        for (const bs of sizes) {
          const batches = packBatches(input.encoded, bs);
          const padded = batches.reduce((acc, b) => acc + b.count * b.seq, 0);
          const flops = batches.reduce((acc, b) => acc + bertFlopsBatch(input.cfg, b.count, b.seq), 0);
          // Warm up on the shortest and the longest batch (grows the arena to the largest shape).
          await group.load(batches, [0, batches.length - 1, batches.length - 1]);
          const rates: number[] = [];
          const samples: Array<[number, number]> = [];
          const wall: number[] = [];
          for (let r = 0; r < opts.repeats; r++) {
            const { wallMs, runs } = await group.run(batches.length);
            wall.push(wallMs);
            rates.push(input.encoded.length / (wallMs / 1000));
            if (bs === 1) for (const [i, ms] of runs) samples.push([batches[i]!.seq, ms]);
          }
          const secs = wall.map((w) => w / 1000);
          const p: CeilingPoint = {
            workload: input.workload,
            model: input.model,
            sessions,
            threads,
            batch: bs,
            arena: v.arena,
            spinning: v.spinning,
            inputsPerSec: roundSpread(spread(rates), 1),
            tokensPerSec: roundSpread(spread(secs.map((s) => realTokens / s)), 0),
            gflops: roundSpread(spread(secs.map((s) => flops / s / 1e9)), 2),
            paddingShare: round(1 - realTokens / padded, 3),
          };
          points.push(p);
          log(
            `  ${input.workload} ${sessions}x${threads}t batch ${String(bs).padStart(2)} arena ${v.arena ? 'on ' : 'off'} spin ${v.spinning ?? '-'}: ` +
              `${p.inputsPerSec.median} ${input.workload === 'embed' ? 'inputs' : 'pairs'}/s, ${p.tokensPerSec.median} tok/s, ${p.gflops.median} GFLOP/s`,
          );
          if (latencies && bs === 1 && sessions === 1 && isBaseline(v)) latencies.push(singleLatency(threads, samples));
        }
      } finally {
        await group.close();
      }
    }
  }
  return points;
}

function singleLatency(threads: number, samples: Array<[number, number]>): SingleLatency {
  const ms = samples.map(([, m]) => m);
  const byBucket: SingleLatency['byBucket'] = {};
  for (const [lo, hi] of LENGTH_BUCKETS) {
    const xs = samples.filter(([len]) => len >= lo && len <= hi).map(([, m]) => m);
    if (xs.length) byBucket[bucketOf(lo)] = { n: xs.length, medianMs: round(median(xs), 2) };
  }
  return {
    sessions: 1,
    threads,
    medianMs: round(median(ms), 2),
    p90Ms: round(percentile(ms, 90), 2),
    meanMs: round(ms.reduce((a, b) => a + b, 0) / Math.max(ms.length, 1), 2),
    byBucket,
  };
}

function best(points: CeilingPoint[]): CeilingPoint | null {
  return points.reduce<CeilingPoint | null>(
    (b, p) => (!b || p.inputsPerSec.median > b.inputsPerSec.median ? p : b),
    null,
  );
}

export async function runCeiling(opts: CeilingOptions): Promise<CeilingResult> {
  const raw = readJson<{
    hidden_size: number;
    num_hidden_layers: number;
    intermediate_size: number;
    num_attention_heads: number;
  }>(join(modelDir(opts.embedModel), 'config.json'));
  const cfg = { hidden: raw.hidden_size, layers: raw.num_hidden_layers, intermediate: raw.intermediate_size };
  const rerankRaw = readJson<typeof raw>(join(modelDir(opts.rerankModel), 'config.json'));
  const rerankCfg = {
    hidden: rerankRaw.hidden_size,
    layers: rerankRaw.num_hidden_layers,
    intermediate: rerankRaw.intermediate_size,
  };

  const encoded = tokenizeMix(opts.embedModel, embeddingMix(opts.n));
  const pairs = tokenizePairs(opts.rerankModel, rerankMix(opts.rerankRequests));
  const mix = lengthStats(encoded);
  log(
    `ceiling: ${mix.count} inputs, ${mix.tokens} tokens (mean ${mix.mean}, ${mix.min}-${mix.max}); ${pairs.length} rerank pairs`,
  );

  log('ceiling: fp32 MatMul peak');
  const matmul = await measureMatmul(opts);
  const matmulPeakGflops = Math.max(...matmul.map((m) => m.gflops.median));

  log('ceiling: embedder sweep');
  const latencies: SingleLatency[] = [];
  const embed = await sweep(
    opts,
    {
      workload: 'embed',
      model: opts.embedModel,
      encoded,
      batchSizes: opts.batchSizes,
      optionBatches: opts.optionBatches,
      cfg,
    },
    latencies,
  );
  log('ceiling: reranker sweep');
  const rerank = await sweep(
    opts,
    {
      workload: 'rerank',
      model: opts.rerankModel,
      encoded: pairs,
      batchSizes: opts.rerankBatchSizes,
      optionBatches: [],
      cfg: rerankCfg,
    },
    null,
  );

  let int8: CeilingResult['int8'] = null;
  if (opts.int8BatchSizes.length > 0) {
    const embedModel = `${opts.embedModel}:int8`;
    const rerankModel = `${opts.rerankModel}:int8`;
    log('ceiling: int8 embedder and reranker');
    const singleLatency: SingleLatency[] = [];
    const embed8 = await sweep(
      opts,
      { workload: 'embed', model: embedModel, encoded, batchSizes: opts.int8BatchSizes, optionBatches: [], cfg },
      singleLatency,
    );
    const rerank8 = await sweep(
      opts,
      {
        workload: 'rerank',
        model: rerankModel,
        encoded: pairs,
        batchSizes: opts.int8BatchSizes,
        optionBatches: [],
        cfg: rerankCfg,
      },
      null,
    );
    int8 = {
      embedModel,
      rerankModel,
      embed: embed8,
      rerank: rerank8,
      bestEmbed: best(embed8),
      bestRerank: best(rerank8),
      singleLatency,
    };
  }

  return {
    embedModel: opts.embedModel,
    rerankModel: opts.rerankModel,
    mix,
    rerankPairs: lengthStats(pairs),
    modelConfig: { ...cfg, heads: raw.num_attention_heads },
    flopsPerToken: {
      formula:
        'layers x (8 h^2 + 4 h i + 4 S h), h hidden, i intermediate, S padded sequence length; multiply-add = 2 FLOPs',
      atSeq128: bertFlopsPerToken(cfg, 128),
      atMeanLength: Math.round(bertFlopsPerToken(cfg, mix.mean)),
      meanLength: mix.mean,
    },
    matmul,
    matmulPeakGflops,
    embed,
    rerank,
    bestEmbed: best(embed),
    bestRerank: best(rerank),
    singleLatency: latencies,
    int8,
    notes: [
      'Options always: graphOptimizationLevel all, executionMode sequential, interOpNumThreads 1. Baseline: arena on, spinning ORT default (1).',
      'Non-default options (arena off, spinning 0) are tried at the option batch sizes only.',
      'Each session runs in its own worker thread; workers take batches (sorted by length) from a shared atomic counter.',
      'Single-input latency: 1 session, batch 1, each input alone (from the batch-1 sweep point).',
      'int8: the same mix through the int8 graphs; GFLOP/s there counts the fp32-equivalent work.',
    ],
  };
}

// ---------------------------------------------------------------------------------------------

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const f = parseFlags(process.argv.slice(2));
  const m = machineInfo();
  const d = ceilingDefaults(f.quick === true, m.cores);
  const opts: CeilingOptions = {
    ...d,
    n: flagNumber(f, 'n', d.n),
    repeats: flagNumber(f, 'repeats', d.repeats),
    batchSizes: flagNumbers(f, 'batches', d.batchSizes),
    embedModel: flagList(f, 'embed-model', [d.embedModel])[0] ?? d.embedModel,
    rerankModel: flagList(f, 'rerank-model', [d.rerankModel])[0] ?? d.rerankModel,
  };
  runCeiling(opts).then(
    (r) => {
      process.stdout.write(JSON.stringify(r, null, 2) + '\n');
    },
    (e: unknown) => {
      console.error(e);
      process.exitCode = 1;
    },
  );
}
