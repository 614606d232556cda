/**
 * The batch-while-online workload (`--workloads batch-while-online`, gateway targets): does bulk
 * work yield to interactive work, and does it lose throughput doing so?
 *
 *   online-c1-idle          p50 of single-input embedding requests one at a time on the idle server
 *                           (measured before and after the rest, pooled)
 *   online-c1-during-batch  the same requests while a batch runs (20,000 inputs; --batch-inputs)
 *   http-c32-same-inputs    the batch's inputs sent as single-input requests, 32 in flight
 *   batch-alone             the batch's inputs/s, from its creation to `completed` (polled every 250 ms)
 *
 * Targets: online p50 during the batch <= 1.5x idle; the batch >= 0.95x the c=32 HTTP rate. The two
 * rates are measured one after the other on the same server, the order alternating with each repeat.
 */
import { randomBytes } from 'node:crypto';
import { embeddingMix } from './mix.js';
import { log, median, round, roundSpread, sleep, spread } from './lib/common.js';
import type { HttpPoint } from './http.js';

export const BATCH_WHILE_ONLINE = { inputs: 20_000, httpConcurrency: 32, idleProbes: 40 } as const;

interface Target {
  url: string;
}

interface Measured {
  idle: number[];
  during: number[];
  httpSeconds: number;
  httpFailed: number;
  batchSeconds: number;
  batchFailed: number;
}

const quantile = (xs: number[], q: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))] ?? NaN;

/** One embedding request of one input: its latency in ms, and whether it was answered 200. */
async function embedOne(
  target: Target,
  headers: Record<string, string>,
  model: string,
  input: string,
): Promise<{ ms: number; ok: boolean }> {
  const t0 = performance.now();
  const res = await fetch(`${target.url}/v1/embeddings`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({ model, input, encoding_format: 'base64' }),
    signal: AbortSignal.timeout(300_000),
  });
  await res.arrayBuffer();
  return { ms: performance.now() - t0, ok: res.status === 200 };
}

async function probes(
  target: Target,
  headers: Record<string, string>,
  model: string,
  texts: string[],
  keepGoing: (count: number) => boolean,
): Promise<number[]> {
  const latencies: number[] = [];
  for (let i = 0; keepGoing(i); i++) {
    const { ms, ok } = await embedOne(target, headers, model, texts[i % texts.length]!);
    if (ok) latencies.push(ms);
  }
  return latencies;
}

async function httpPass(
  target: Target,
  headers: Record<string, string>,
  model: string,
  inputs: string[],
): Promise<{ seconds: number; failed: number }> {
  let next = 0;
  let failed = 0;
  const started = performance.now();
  const client = async () => {
    while (next < inputs.length) {
      const { ok } = await embedOne(target, headers, model, inputs[next++]!);
      if (!ok) failed++;
    }
  };
  await Promise.all(Array.from({ length: BATCH_WHILE_ONLINE.httpConcurrency }, client));
  return { seconds: (performance.now() - started) / 1000, failed };
}

/** Uploads the inputs as a batch, runs it, and probes online latency c=1 while it is in progress. */
async function batchPass(
  target: Target,
  headers: Record<string, string>,
  model: string,
  inputs: string[],
  online: string[],
): Promise<{ seconds: number; failed: number; during: number[] }> {
  const lines = inputs.map((input, i) =>
    JSON.stringify({ custom_id: `r${i}`, method: 'POST', url: '/v1/embeddings', body: { model, input } }),
  );
  const form = new FormData();
  form.append('purpose', 'batch');
  form.append('file', new Blob([lines.join('\n')]), 'bench.jsonl');
  const file = (await (await fetch(`${target.url}/v1/files`, { method: 'POST', headers, body: form })).json()) as {
    id: string;
  };
  const started = performance.now();
  const created = (await (
    await fetch(`${target.url}/v1/batches`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ input_file_id: file.id, endpoint: '/v1/embeddings', completion_window: '24h' }),
    })
  ).json()) as { id: string };
  let status = 'validating';
  let counts = { completed: 0, failed: 0 };
  let seconds = 0;
  const poll = async () => {
    while (!['completed', 'failed', 'cancelled', 'expired'].includes(status)) {
      await sleep(250);
      const batch = (await (await fetch(`${target.url}/v1/batches/${created.id}`, { headers })).json()) as {
        status: string;
        request_counts: { completed: number; failed: number };
      };
      status = batch.status;
      counts = batch.request_counts;
    }
    seconds = (performance.now() - started) / 1000;
  };
  const polling = poll();
  // Probes start once the batch's inputs reach the models, and stop before its last ones.
  while (status === 'validating') await sleep(50);
  const during = await probes(target, headers, model, online, () => status === 'in_progress');
  await polling;
  if (status !== 'completed') throw new Error(`the bench batch ended ${status}`);
  await fetch(`${target.url}/v1/files/${file.id}`, { method: 'DELETE', headers });
  return { seconds, failed: counts.failed, during };
}

/** The workload on one gateway target, `repeats` times; its points. */
export async function runBatchWhileOnline(
  name: string,
  target: Target,
  headers: Record<string, string>,
  model: string,
  { repeats, inputs: count }: { repeats: number; inputs: number },
): Promise<{ points: HttpPoint[]; latencyRatio: number; throughputRatio: number }> {
  const mix = embeddingMix(256);
  const runs: Measured[] = [];
  for (let r = 0; r < repeats; r++) {
    // Inputs no earlier pass sent (a server with a cache would otherwise answer them from it).
    const tag = randomBytes(3).toString('hex');
    const inputs = (pass: string) =>
      Array.from({ length: count }, (_, i) => `[${tag}.${pass}.${i}] ${mix[i % mix.length]}`);
    const online = mix.map((text, i) => `[${tag}.online.${i}] ${text}`);
    const idleBefore = await probes(target, headers, model, online, (i) => i < BATCH_WHILE_ONLINE.idleProbes);
    let http: { seconds: number; failed: number };
    let batch: { seconds: number; failed: number; during: number[] };
    if (r % 2 === 0) {
      http = await httpPass(target, headers, model, inputs('http'));
      batch = await batchPass(target, headers, model, inputs('batch'), online);
    } else {
      batch = await batchPass(target, headers, model, inputs('batch'), online);
      http = await httpPass(target, headers, model, inputs('http'));
    }
    const idleAfter = await probes(target, headers, model, online, (i) => i < BATCH_WHILE_ONLINE.idleProbes);
    const run: Measured = {
      idle: [...idleBefore, ...idleAfter],
      during: batch.during,
      httpSeconds: http.seconds,
      httpFailed: http.failed,
      batchSeconds: batch.seconds,
      batchFailed: batch.failed,
    };
    runs.push(run);
    log(
      `  ${name.padEnd(12)} batch-while-online repeat ${r + 1}: online p50 idle ${round(quantile(run.idle, 0.5), 1)} ms, ` +
        `during batch ${round(quantile(run.during, 0.5), 1)} ms (${run.during.length} requests); ` +
        `batch ${round(count / run.batchSeconds, 1)} inputs/s, ` +
        `http c=${BATCH_WHILE_ONLINE.httpConcurrency} ${round(count / run.httpSeconds, 1)} inputs/s`,
    );
  }
  const point = (
    workload: string,
    concurrency: number,
    seconds: number[],
    latencies: number[][],
    failed: number,
    count: (i: number) => number,
  ): HttpPoint => {
    const rates = seconds.map((s, i) => count(i) / s);
    return {
      target: name,
      workload,
      unit: 'inputs',
      concurrency,
      durationS: round(median(seconds), 2),
      requestsPerSec: roundSpread(spread(rates), 2),
      unitsPerSec: roundSpread(spread(rates), 1),
      p50Ms: roundSpread(spread(latencies.map((l) => quantile(l, 0.5))), 1),
      p99Ms: roundSpread(spread(latencies.map((l) => quantile(l, 0.99))), 1),
      non2xx: failed,
      errors: 0,
      timeouts: 0,
      statusCodes: {},
    };
  };
  const nothing = runs.map(() => [] as number[]);
  const points = [
    point(
      'online-c1-idle',
      1,
      runs.map((r) => r.idle.reduce((a, b) => a + b, 0) / 1000),
      runs.map((r) => r.idle),
      0,
      (i) => runs[i]!.idle.length,
    ),
    point(
      'online-c1-during-batch',
      1,
      runs.map((r) => r.during.reduce((a, b) => a + b, 0) / 1000),
      runs.map((r) => r.during),
      0,
      (i) => runs[i]!.during.length,
    ),
    point(
      'http-c32-same-inputs',
      BATCH_WHILE_ONLINE.httpConcurrency,
      runs.map((r) => r.httpSeconds),
      nothing,
      runs.reduce((a, r) => a + r.httpFailed, 0),
      () => count,
    ),
    point(
      'batch-alone',
      1,
      runs.map((r) => r.batchSeconds),
      nothing,
      runs.reduce((a, r) => a + r.batchFailed, 0),
      () => count,
    ),
  ];
  const latencyRatio = round(median(runs.map((r) => quantile(r.during, 0.5) / quantile(r.idle, 0.5))), 2);
  const throughputRatio = round(median(runs.map((r) => r.httpSeconds / r.batchSeconds)), 2);
  log(
    `  ${name.padEnd(12)} batch-while-online: online p50 during a batch / idle ${latencyRatio}x (target <= 1.5), ` +
      `batch / http c=32 throughput ${throughputRatio}x (target >= 0.95)`,
  );
  return { points, latencyRatio, throughputRatio };
}
