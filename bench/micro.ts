/**
 * Micro-benches of the pure functions on the request path, each a small named case.
 *
 * Functions come from the project (src/text, src/vectors, src/engine) when present; a case whose
 * project function is missing runs a plain reference implementation instead and says so
 * (`impl: 'reference'`), so the numbers remain a baseline to compare the project's code against.
 * Add a case: push to CASES with a name, the units one call processes, and a setup returning the call.
 */
import { pathToFileURL } from 'node:url';
import {
  DEFAULT_EMBED_MODEL,
  type Spread,
  flagNumber,
  log,
  nowMs,
  parseFlags,
  round,
  roundSpread,
  spread,
} from './lib/common.js';
import { MAX_TOKENS, embeddingMix, loadTokenizer, rerankMix, tokenizeMix, type Encoded } from './mix.js';
import { modelDir } from './lib/common.js';

type Fn = (...args: never[]) => unknown;

/** Imports a project module by path relative to the repo's src/; undefined when absent or broken. */
async function project(rel: string): Promise<Record<string, unknown> | undefined> {
  const url = new URL(`../src/${rel}`, import.meta.url).href;
  try {
    return (await import(url)) as Record<string, unknown>;
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code !== 'ERR_MODULE_NOT_FOUND')
      log(`micro: src/${rel} did not load: ${(error as Error).message.split('\n')[0]}`);
    return undefined;
  }
}

async function projectFn<T extends Fn>(rel: string, name: string): Promise<T | undefined> {
  const mod = await project(rel);
  const f = mod?.[name];
  return typeof f === 'function' ? (f as T) : undefined;
}

export interface MicroCase {
  name: string;
  /** what one unit is: 'input', 'token', 'row', 'byte' ... */
  unit: string;
  setup(
    ctx: MicroContext,
  ): Promise<
    { impl: 'src' | 'reference'; unitsPerCall: number; call: () => unknown; note?: string } | { skip: string }
  >;
}

export interface MicroContext {
  texts: string[];
  encoded: Encoded[];
  modelId: string;
}

export interface MicroResult {
  name: string;
  impl: 'src' | 'reference' | 'skipped';
  unit: string;
  unitsPerCall: number;
  /** units per second over repeats */
  unitsPerSec: Spread | null;
  /** microseconds per call, median repeat */
  usPerCall: number | null;
  note?: string;
}

/** The project's tokenizer (src/text TextTokenizer), if present and shaped as expected. */
interface ProjectTokenizer {
  encode(text: string): Int32Array;
  single(content: Int32Array, maxTokens: number): Int32Array;
  pair(a: Int32Array, b: Int32Array, maxTokens: number): { ids: Int32Array };
}

async function textTokenizer(modelId: string): Promise<ProjectTokenizer | undefined> {
  const mod = await project('text/index.js');
  const cls = mod?.TextTokenizer as { fromDirectory?: (dir: string) => Promise<ProjectTokenizer> } | undefined;
  if (typeof cls?.fromDirectory !== 'function') return undefined;
  try {
    return await cls.fromDirectory(modelDir(modelId));
  } catch (error) {
    log(`micro: TextTokenizer.fromDirectory failed: ${(error as Error).message}`);
    return undefined;
  }
}

function sameIds(a: ArrayLike<number>, b: ArrayLike<number>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

// ---------------------------------------------------------------------------------------------
// Reference implementations (what the project's functions are measured against when absent)

function refMeanPool(data: Float32Array, lengths: Int32Array, seqLen: number, width: number): Float32Array {
  const rows = lengths.length;
  const out = new Float32Array(rows * width);
  for (let r = 0; r < rows; r++) {
    const len = lengths[r]!;
    const o = r * width;
    for (let t = 0; t < len; t++) {
      const base = (r * seqLen + t) * width;
      for (let d = 0; d < width; d++) out[o + d]! += data[base + d]!;
    }
    const inv = 1 / Math.max(len, 1);
    for (let d = 0; d < width; d++) out[o + d]! *= inv;
  }
  return out;
}

function refNormalizeRows(v: Float32Array, width: number): void {
  for (let o = 0; o < v.length; o += width) {
    let s = 0;
    for (let d = 0; d < width; d++) s += v[o + d]! * v[o + d]!;
    const inv = 1 / Math.max(Math.sqrt(s), 1e-12);
    for (let d = 0; d < width; d++) v[o + d]! *= inv;
  }
}

const refFloatJson = (row: Float32Array): string => JSON.stringify(Array.from(row));
const refBase64 = (row: Float32Array): string =>
  Buffer.from(row.buffer, row.byteOffset, row.byteLength).toString('base64');

function refPackInt64(enc: readonly Encoded[]): BigInt64Array[] {
  const seq = enc.reduce((m, e) => Math.max(m, e.ids.length), 0);
  const ids = new BigInt64Array(enc.length * seq);
  const mask = new BigInt64Array(enc.length * seq);
  for (let r = 0; r < enc.length; r++) {
    const row = enc[r]!.ids;
    for (let t = 0; t < row.length; t++) {
      ids[r * seq + t] = BigInt(row[t]!);
      mask[r * seq + t] = 1n;
    }
  }
  return [ids, mask];
}

function randomRows(rows: number, width: number): Float32Array {
  const v = new Float32Array(rows * width);
  let x = 12345;
  for (let i = 0; i < v.length; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    v[i] = (x / 2 ** 32) * 2 - 1;
  }
  return v;
}

const WIDTH = 384;

// ---------------------------------------------------------------------------------------------
// The cases

export const CASES: MicroCase[] = [
  {
    name: 'tokenize/hf-tokenizers',
    unit: 'token',
    async setup(ctx) {
      const tok = loadTokenizer(ctx.modelId).tokenizer;
      const tokens = ctx.encoded.reduce((a, e) => a + e.ids.length, 0);
      return {
        impl: 'reference',
        unitsPerCall: tokens,
        call: () => {
          for (const t of ctx.texts) tok.encode(t, { add_special_tokens: true });
        },
        note: `@huggingface/tokenizers as shipped, ${ctx.texts.length} mix inputs per call`,
      };
    },
  },
  {
    name: 'tokenize/src-TextTokenizer',
    unit: 'token',
    async setup(ctx) {
      const tok = await textTokenizer(ctx.modelId);
      if (!tok) return { skip: 'src/text TextTokenizer absent' };
      const same = ctx.texts.every((t, i) => sameIds(tok.single(tok.encode(t), MAX_TOKENS), ctx.encoded[i]!.ids));
      const tokens = ctx.encoded.reduce((a, e) => a + e.ids.length, 0);
      return {
        impl: 'src',
        unitsPerCall: tokens,
        call: () => {
          for (const t of ctx.texts) tok.single(tok.encode(t), MAX_TOKENS);
        },
        note: `encode + single(512); ids identical to the reference on the mix: ${same}`,
      };
    },
  },
  {
    name: 'tokenize/pairs-1x50-reference',
    unit: 'pair',
    async setup(ctx) {
      const tok = loadTokenizer(ctx.modelId);
      const r = rerankMix(1)[0]!;
      return {
        impl: 'reference',
        unitsPerCall: r.documents.length,
        call: () => {
          for (const d of r.documents) tok.encodePair(r.query, d);
        },
        note: 'query re-tokenised per pair, longest_first to 512',
      };
    },
  },
  {
    name: 'tokenize/pairs-1x50-src-TextTokenizer',
    unit: 'pair',
    async setup(ctx) {
      const tok = await textTokenizer(ctx.modelId);
      if (!tok) return { skip: 'src/text TextTokenizer absent' };
      const r = rerankMix(1)[0]!;
      const ref = loadTokenizer(ctx.modelId);
      const same = r.documents.every((d) =>
        sameIds(tok.pair(tok.encode(r.query), tok.encode(d), MAX_TOKENS).ids, ref.encodePair(r.query, d).ids),
      );
      return {
        impl: 'src',
        unitsPerCall: r.documents.length,
        call: () => {
          const q = tok.encode(r.query);
          for (const d of r.documents) tok.pair(q, tok.encode(d), MAX_TOKENS);
        },
        note: `query tokenised once; ids identical to the reference: ${same}`,
      };
    },
  },
  {
    name: 'pack/int64-tensors-batch32',
    unit: 'input',
    async setup(ctx) {
      const sorted = [...ctx.encoded].sort((a, b) => a.ids.length - b.ids.length);
      const mid = Math.max(0, (sorted.length >> 1) - 16);
      const batch = sorted.slice(mid, mid + 32);
      return {
        impl: 'reference',
        unitsPerCall: batch.length,
        call: () => refPackInt64(batch),
        note: 'ids + mask to BigInt64Array, 32 mix inputs around the median length, padded to their longest',
      };
    },
  },
  {
    name: 'pack/scheduler-single-inputs',
    unit: 'input',
    async setup(ctx) {
      const mod = await project('engine/scheduler.js');
      const Scheduler = mod?.Scheduler as
        | (new (
            runner: unknown,
            options: unknown,
            models: unknown,
          ) => { submit(m: string, inputs: unknown[]): Promise<unknown>; drain(): Promise<void> })
        | undefined;
      if (!Scheduler) return { skip: 'src/engine/scheduler.ts Scheduler absent' };
      // A runner that answers at once: what is left is queueing, batch forming and splitting results.
      const runner = {
        threads: 2,
        run: (task: { lengths: Int32Array }) =>
          Promise.resolve({ output: new Float32Array(task.lengths.length * WIDTH), width: WIDTH, inferenceMs: 0 }),
      };
      const inputs = ctx.encoded.map((e) => ({ ids: Int32Array.from(e.ids) }));
      const options = { maxBatchTokens: 16384, maxBatchSize: 8, queueCapacity: 1 << 20, maxInFlight: 4 };
      try {
        const s = new Scheduler(runner, options, [{ id: 'm' }]);
        await Promise.all(inputs.map((i) => s.submit('m', [i])));
      } catch (error) {
        return { skip: `Scheduler API did not fit: ${(error as Error).message}` };
      }
      return {
        impl: 'src',
        unitsPerCall: inputs.length,
        call: async () => {
          const s = new Scheduler(runner, options, [{ id: 'm' }]);
          await Promise.all(inputs.map((i) => s.submit('m', [i])));
        },
        note: 'each mix input submitted as its own job to a runner that returns at once (async: includes microtask hops)',
      };
    },
  },
  {
    name: 'batch/form-queue-2000',
    unit: 'batch',
    async setup(ctx) {
      const mod = await project('engine/scheduler.js');
      type Queue = { items: Array<{ length: number; index: number }>; maxBatchSize: number; uniformLength: boolean };
      const Scheduler = mod?.Scheduler as
        | (new (
            lanes: unknown,
            options: unknown,
            models: unknown,
          ) => { formBatch(q: Queue, budget: number): unknown[] })
        | undefined;
      if (!Scheduler) return { skip: 'src/engine/scheduler.ts Scheduler absent' };
      // A queue of 2,000 inputs of the mix's lengths, formed into batches of the CPU's default
      // budget until it is empty: the main thread's part of a large request's batching.
      const lengths = Array.from({ length: 2000 }, (_, i) => ctx.encoded[i % ctx.encoded.length]!.ids.length);
      const scheduler = new Scheduler(
        { lane: () => undefined },
        { maxBatchTokens: 256, maxBatchSize: 32, queueCapacity: 4096, maxInFlight: 4 },
        [{ id: 'm' }],
      );
      const formAll = () => {
        const queue: Queue = {
          items: lengths.map((length, index) => ({ length, index })),
          maxBatchSize: 32,
          uniformLength: false,
        };
        let batches = 0;
        while (queue.items.length > 0) {
          scheduler.formBatch(queue, 256);
          batches += 1;
        }
        return batches;
      };
      return {
        impl: 'src',
        unitsPerCall: formAll(),
        call: formAll,
        note: '2,000 inputs of the mix, budget 256 tokens',
      };
    },
  },
  {
    name: 'pool/mean-32x128x384',
    unit: 'row',
    async setup() {
      const rows = 32,
        seq = 128;
      const data = randomRows(rows * seq, WIDTH);
      const lengths = Int32Array.from({ length: rows }, (_, i) => 64 + ((i * 37) % 65));
      const src = await projectFn<typeof refMeanPool>('vectors/pooling.js', 'meanPool');
      const f = src ?? refMeanPool;
      return { impl: src ? 'src' : 'reference', unitsPerCall: rows, call: () => f(data, lengths, seq, WIDTH) };
    },
  },
  {
    name: 'normalize/l2-rows-32x384',
    unit: 'row',
    async setup() {
      const v = randomRows(32, WIDTH);
      const src = await projectFn<typeof refNormalizeRows>('vectors/normalize.js', 'l2NormalizeRows');
      const f = src ?? refNormalizeRows;
      return { impl: src ? 'src' : 'reference', unitsPerCall: 32, call: () => f(v, WIDTH) };
    },
  },
  {
    name: 'serialize/float-json-row',
    unit: 'row',
    async setup() {
      const rows = Array.from({ length: 32 }, (_, i) => randomRows(1, WIDTH).map((x) => x * (i + 1) * 0.01));
      const src = await projectFn<typeof refFloatJson>('vectors/encoding.js', 'float32ToJson');
      const f = src ?? refFloatJson;
      const bytes = rows.reduce((a, r) => a + f(r).length, 0) / rows.length;
      return {
        impl: src ? 'src' : 'reference',
        unitsPerCall: rows.length,
        call: () => {
          for (const r of rows) f(r);
        },
        note: `${Math.round(bytes)} bytes per 384-dim row`,
      };
    },
  },
  {
    name: 'serialize/base64-row',
    unit: 'row',
    async setup() {
      const rows = Array.from({ length: 32 }, () => randomRows(1, WIDTH));
      const src = await projectFn<typeof refBase64>('vectors/encoding.js', 'float32ToBase64');
      const f = src ?? refBase64;
      const bytes = f(rows[0]!).length;
      return {
        impl: src ? 'src' : 'reference',
        unitsPerCall: rows.length,
        call: () => {
          for (const r of rows) f(r);
        },
        note: `${bytes} bytes per 384-dim row`,
      };
    },
  },
  {
    name: 'serialize/openai-body-32-float',
    unit: 'row',
    async setup() {
      const v = randomRows(32, WIDTH);
      const call = (): string =>
        JSON.stringify({
          object: 'list',
          model: 'm',
          usage: { prompt_tokens: 1, total_tokens: 1 },
          data: Array.from({ length: 32 }, (_, i) => ({
            object: 'embedding',
            index: i,
            embedding: Array.from(v.subarray(i * WIDTH, (i + 1) * WIDTH)),
          })),
        });
      return {
        impl: 'reference',
        unitsPerCall: 32,
        call,
        note: 'naive JSON.stringify of the whole OpenAI response, as a peer server does',
      };
    },
  },
];

// ---------------------------------------------------------------------------------------------

async function timeCase(call: () => unknown, minMs: number): Promise<{ calls: number; ms: number }> {
  let calls = 0;
  const t0 = nowMs();
  let t = t0;
  while (t - t0 < minMs) {
    const r = call();
    if (r instanceof Promise) await r;
    calls++;
    t = nowMs();
  }
  return { calls, ms: t - t0 };
}

export interface MicroOptions {
  n: number;
  repeats: number;
  minMs: number;
  modelId: string;
  only?: string[];
}

export async function runMicro(opts: MicroOptions): Promise<MicroResult[]> {
  const texts = embeddingMix(opts.n);
  const ctx: MicroContext = { texts, encoded: tokenizeMix(opts.modelId, texts), modelId: opts.modelId };
  const out: MicroResult[] = [];
  for (const c of CASES) {
    if (opts.only && !opts.only.some((o) => c.name.includes(o))) continue;
    const s = await c.setup(ctx);
    if ('skip' in s) {
      out.push({
        name: c.name,
        impl: 'skipped',
        unit: c.unit,
        unitsPerCall: 0,
        unitsPerSec: null,
        usPerCall: null,
        note: s.skip,
      });
      log(`  micro ${c.name}: skipped (${s.skip})`);
      continue;
    }
    await timeCase(s.call, Math.min(200, opts.minMs)); // warm-up (JIT)
    const rates: number[] = [];
    const perCall: number[] = [];
    for (let r = 0; r < opts.repeats; r++) {
      const { calls, ms } = await timeCase(s.call, opts.minMs);
      rates.push((calls * s.unitsPerCall) / (ms / 1000));
      perCall.push((ms * 1000) / calls);
    }
    const res: MicroResult = {
      name: c.name,
      impl: s.impl,
      unit: c.unit,
      unitsPerCall: s.unitsPerCall,
      unitsPerSec: roundSpread(spread(rates), 0),
      usPerCall: round(spread(perCall).median, 2),
      note: s.note,
    };
    log(`  micro ${c.name} [${s.impl}]: ${res.unitsPerSec!.median} ${c.unit}s/s, ${res.usPerCall} us/call`);
    out.push(res);
  }
  return out;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const f = parseFlags(process.argv.slice(2));
  const quick = f.quick === true;
  runMicro({
    n: flagNumber(f, 'n', quick ? 64 : 256),
    repeats: flagNumber(f, 'repeats', quick ? 1 : 3),
    minMs: flagNumber(f, 'min-ms', quick ? 300 : 1000),
    modelId: DEFAULT_EMBED_MODEL,
    only: typeof f.case === 'string' ? f.case.split(',') : undefined,
  }).then(
    (r) => process.stdout.write(JSON.stringify(r, null, 2) + '\n'),
    (e: unknown) => {
      console.error(e);
      process.exitCode = 1;
    },
  );
}
