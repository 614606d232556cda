/**
 * `onnx-gateway bench`: latency and throughput of one model across batch sizes and sequence
 * lengths, either in this process through the same engine the server uses, or against a running
 * server over HTTP (reading its Server-Timing breakdown). For people who run the gateway to
 * measure models: a table on the terminal, JSON and CSV for their own plots.
 */
import cliProgress from 'cli-progress';
import { embed } from '../core/embeddings.js';
import type { CoreContext, Timings } from '../core/context.js';
import { rerank } from '../core/rerank.js';
import { parseServerTiming } from '../http/timing.js';
import { percentile } from '../vectors/percentile.js';

export interface BenchPlan {
  batchSizes: number[];
  /** Target tokens per input, special tokens included. */
  sequenceLengths: number[];
  /** Requests per point (after one warm-up request). */
  requests: number;
  /** Requests in flight at once. */
  concurrency: number;
}

export interface BenchPoint {
  batchSize: number;
  sequenceLength: number;
  /** Tokens per input actually fed (after tokenisation), for checking the target. */
  tokensPerInput: number;
  requests: number;
  concurrency: number;
  latencyMs: { p50: number; p90: number; p99: number; mean: number };
  inputsPerSecond: number;
  tokensPerSecond: number;
  /** Medians of the server's own breakdown. */
  breakdownMs: Timings;
}

/** One request of `batch` inputs; resolves with its breakdown and tokens fed. */
export type Target = (texts: string[]) => Promise<{ timings: Timings; tokens: number }>;

/**
 * A text that tokenises to about `tokens` tokens: a common word each (specials excluded). Words are
 * drawn by a hash of the seed and position, so texts of different seeds differ and a server's
 * embedding cache does not answer the bench's requests in place of the model.
 */
export function textOfLength(tokens: number, seed: number): string {
  const words = [
    'the',
    'model',
    'runs',
    'on',
    'a',
    'small',
    'cpu',
    'with',
    'two',
    'cores',
    'and',
    'fast',
    'tokens',
    'for',
    'each',
    'input',
  ];
  const out: string[] = [];
  for (let i = 0; i < Math.max(1, tokens - 2); i++) {
    let h = Math.imul(seed + 1, 0x9e3779b1) ^ Math.imul(i + 1, 0x85ebca6b);
    h = Math.imul(h ^ (h >>> 15), 0x2c1b3c6d);
    out.push(words[((h ^ (h >>> 13)) >>> 0) % words.length]!);
  }
  return out.join(' ');
}

const median = (values: number[]) => percentile(values, 50);

export async function runBench(
  target: Target,
  plan: BenchPlan,
  progress = process.stderr.isTTY,
): Promise<BenchPoint[]> {
  const points: BenchPoint[] = [];
  const total = plan.batchSizes.length * plan.sequenceLengths.length * plan.requests;
  const bar = progress
    ? new cliProgress.SingleBar(
        { format: 'bench {bar} {value}/{total} requests | {point}', hideCursor: true },
        cliProgress.Presets.shades_classic,
      )
    : undefined;
  bar?.start(total, 0, { point: '' });
  for (const sequenceLength of plan.sequenceLengths) {
    for (const batchSize of plan.batchSizes) {
      const label = `batch ${batchSize} x ${sequenceLength} tokens`;
      if (!bar) process.stderr.write(`bench: ${label}\n`);
      bar?.update({ point: label });
      const texts = (offset: number) =>
        Array.from({ length: batchSize }, (_, i) => textOfLength(sequenceLength, offset + i));
      const warm = await target(texts(0));
      const latencies: number[] = [];
      const breakdown: Timings[] = [];
      let next = 0;
      const started = performance.now();
      const client = async () => {
        while (next < plan.requests) {
          const n = next++;
          const sent = performance.now();
          const result = await target(texts(n + 1));
          latencies.push(performance.now() - sent);
          breakdown.push(result.timings);
          bar?.increment();
        }
      };
      await Promise.all(Array.from({ length: Math.min(plan.concurrency, plan.requests) }, client));
      const seconds = (performance.now() - started) / 1000;
      const tokensPerInput = warm.tokens / batchSize;
      points.push({
        batchSize,
        sequenceLength,
        tokensPerInput,
        requests: plan.requests,
        concurrency: plan.concurrency,
        latencyMs: {
          p50: percentile(latencies, 50),
          p90: percentile(latencies, 90),
          p99: percentile(latencies, 99),
          mean: latencies.reduce((a, b) => a + b, 0) / latencies.length,
        },
        inputsPerSecond: (plan.requests * batchSize) / seconds,
        tokensPerSecond: (plan.requests * batchSize * tokensPerInput) / seconds,
        breakdownMs: {
          tokenizeMs: median(breakdown.map((b) => b.tokenizeMs)),
          queueMs: median(breakdown.map((b) => b.queueMs)),
          loadMs: median(breakdown.map((b) => b.loadMs)),
          inferenceMs: median(breakdown.map((b) => b.inferenceMs)),
        },
      });
    }
  }
  bar?.stop();
  return points;
}

/** In-process target: the engine and core operations the server uses, without HTTP. */
export function coreTarget(core: CoreContext, model: string, task: 'embedding' | 'rerank'): Target {
  if (task === 'embedding') {
    return async (texts) => {
      const result = await embed(core, { model, input: texts });
      return { timings: result.timings, tokens: result.promptTokens };
    };
  }
  return async (texts) => {
    const result = await rerank(core, { model, query: 'how fast is the model', documents: texts });
    return { timings: result.timings, tokens: result.totalTokens };
  };
}

/** HTTP target: a running server's /v1/embeddings or /v1/rerank. */
export function httpTarget(baseUrl: string, model: string, task: 'embedding' | 'rerank', apiKey?: string): Target {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;
  const url = `${baseUrl.replace(/\/$/, '')}/v1/${task === 'embedding' ? 'embeddings' : 'rerank'}`;
  return async (texts) => {
    const body =
      task === 'embedding'
        ? { model, input: texts, encoding_format: 'base64' }
        : { model, query: 'how fast is the model', documents: texts };
    const response = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
    const json = (await response.json()) as { usage?: { total_tokens?: number }; error?: { message: string } };
    if (!response.ok) throw new Error(`${url} answered ${response.status}: ${json.error?.message ?? 'no message'}`);
    const phases = parseServerTiming(response.headers.get('server-timing'));
    return {
      timings: {
        tokenizeMs: phases.tokenize ?? NaN,
        queueMs: phases.queue ?? NaN,
        loadMs: phases.load ?? 0,
        inferenceMs: phases.inference ?? NaN,
      },
      tokens: json.usage?.total_tokens ?? 0,
    };
  };
}

export function formatTable(points: BenchPoint[]): string {
  const header = [
    'batch',
    'tokens',
    'p50 ms',
    'p90 ms',
    'p99 ms',
    'inputs/s',
    'tokens/s',
    'tokenize',
    'queue',
    'inference',
  ];
  const rows = points.map((p) => [
    String(p.batchSize),
    p.tokensPerInput.toFixed(0),
    p.latencyMs.p50.toFixed(2),
    p.latencyMs.p90.toFixed(2),
    p.latencyMs.p99.toFixed(2),
    p.inputsPerSecond.toFixed(1),
    p.tokensPerSecond.toFixed(0),
    p.breakdownMs.tokenizeMs.toFixed(2),
    p.breakdownMs.queueMs.toFixed(2),
    p.breakdownMs.inferenceMs.toFixed(2),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i]!)).join('  ');
  return [line(header), ...rows.map(line)].join('\n');
}

export function toCsv(points: BenchPoint[]): string {
  const header =
    'batch_size,sequence_length,tokens_per_input,requests,concurrency,p50_ms,p90_ms,p99_ms,mean_ms,inputs_per_s,tokens_per_s,tokenize_ms,queue_ms,inference_ms';
  const rows = points.map((p) =>
    [
      p.batchSize,
      p.sequenceLength,
      p.tokensPerInput,
      p.requests,
      p.concurrency,
      p.latencyMs.p50,
      p.latencyMs.p90,
      p.latencyMs.p99,
      p.latencyMs.mean,
      p.inputsPerSecond,
      p.tokensPerSecond,
      p.breakdownMs.tokenizeMs,
      p.breakdownMs.queueMs,
      p.breakdownMs.inferenceMs,
    ]
      .map((v) => (typeof v === 'number' ? Number(v.toFixed(4)) : v))
      .join(','),
  );
  return [header, ...rows].join('\n') + '\n';
}
