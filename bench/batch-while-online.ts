/**
 * The batch-while-online workload (`--workloads batch-while-online`, gateway targets): does bulk
 * work yield to interactive work, and does it lose throughput doing so? Each repeat, on one server:
 *
 *   online-c1-idle          single-input embedding requests one at a time on the idle server
 *                           (40 before the rest and 40 after, pooled)
 *   http-c32-same-inputs    the batch's inputs (20,000; --batch-inputs) sent as single-input
 *                           requests, 32 in flight
 *   batch-alone             the same number of inputs as a batch with nothing else running: inputs/s
 *                           from its creation to `completed` (polled every 250 ms)
 *   online-c1-during-batch  the idle requests again, 200 of them, while another such batch runs
 *                           (from its first committed answers; the batch is then cancelled)
 *   batch-during-online     that batch's inputs/s while the requests ran (its committed answers:
 *                           a lower bound), for how much it still got done
 *
 * Targets: online p50 during the batch <= 1.5x idle; the batch alone >= 0.95x the c=32 HTTP rate.
 * The HTTP pass and the lone batch run one after the other, the order alternating with each repeat;
 * every pass sends inputs no earlier pass sent.
 */
import { randomBytes } from 'node:crypto';
import { embeddingMix } from './mix.js';
import { log, median, round, roundSpread, sleep, spread, type Spread } from './lib/common.js';
import type { HttpPoint } from './http.js';

export const BATCH_WHILE_ONLINE = {
  inputs: 20_000,
  httpConcurrency: 32,
  idleProbes: 40,
  duringProbes: 200,
  latencyTarget: 1.5,
  throughputTarget: 0.95,
} as const;

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
  /** Inputs/s the batch run beside the online requests committed while they ran. */
  duringRate: number;
}

/** What the workload reports beside its points: medians over the repeats and their spreads. */
export interface BatchWhileOnlineSummary {
  /** Online p50 during a batch / idle p50. */
  latencyRatio: number;
  /** The lone batch's inputs/s / the c=32 HTTP pass's. */
  throughputRatio: number;
  /** Absent in files written before the workload had them. */
  latencyRatios?: Spread;
  throughputRatios?: Spread;
  batchInputs?: number;
  repeats?: number;
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

interface BatchState {
  status: string;
  request_counts: { completed: number; failed: number };
}

/** Uploads the inputs as a file and starts a batch of them; its id, the file's, and when it was created. */
async function startBatch(
  target: Target,
  headers: Record<string, string>,
  model: string,
  inputs: string[],
): Promise<{ id: string; fileId: string; started: number }> {
  const lines = inputs.map((input, i) =>
    JSON.stringify({ custom_id: `r${i}`, method: 'POST', url: '/v1/embeddings', body: { model, input } }),
  );
  const form = new FormData();
  form.append('purpose', 'batch');
  form.append('file', new Blob([lines.join('\n')]), 'bench.jsonl');
  const uploaded = await fetch(`${target.url}/v1/files`, { method: 'POST', headers, body: form });
  if (!uploaded.ok) throw new Error(`the bench batch's upload: HTTP ${uploaded.status}`);
  const file = (await uploaded.json()) as { id: string };
  const started = performance.now();
  const created = await fetch(`${target.url}/v1/batches`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({ input_file_id: file.id, endpoint: '/v1/embeddings', completion_window: '24h' }),
  });
  if (!created.ok) throw new Error(`the bench batch's creation: HTTP ${created.status}`);
  return { id: ((await created.json()) as { id: string }).id, fileId: file.id, started };
}

async function batchState(target: Target, headers: Record<string, string>, id: string): Promise<BatchState> {
  return (await (await fetch(`${target.url}/v1/batches/${id}`, { headers })).json()) as BatchState;
}

const ended = (status: string) => ['completed', 'failed', 'cancelled', 'expired'].includes(status);

/** Polls a batch every 250 ms until it has ended; its last state. */
async function untilEnded(target: Target, headers: Record<string, string>, id: string): Promise<BatchState> {
  for (;;) {
    const state = await batchState(target, headers, id);
    if (ended(state.status)) return state;
    await sleep(250);
  }
}

/** A batch of the inputs with nothing else running: its seconds from creation to `completed`. */
async function batchAlone(
  target: Target,
  headers: Record<string, string>,
  model: string,
  inputs: string[],
): Promise<{ seconds: number; failed: number }> {
  const batch = await startBatch(target, headers, model, inputs);
  const state = await untilEnded(target, headers, batch.id);
  const seconds = (performance.now() - batch.started) / 1000;
  if (state.status !== 'completed') throw new Error(`the bench batch ended ${state.status}`);
  await fetch(`${target.url}/v1/files/${batch.fileId}`, { method: 'DELETE', headers });
  return { seconds, failed: state.request_counts.failed };
}

/**
 * A batch of the inputs, and online requests one at a time while it runs: from its first committed
 * answers (its inputs are on the workers by then) for `duringProbes` requests or until it ends. The
 * batch is then cancelled: the rest of it would measure nothing.
 */
async function batchBesideOnline(
  target: Target,
  headers: Record<string, string>,
  model: string,
  inputs: string[],
  online: string[],
): Promise<{ during: number[]; rate: number }> {
  const batch = await startBatch(target, headers, model, inputs);
  let state = await batchState(target, headers, batch.id);
  while (!ended(state.status) && state.request_counts.completed + state.request_counts.failed === 0) {
    await sleep(50);
    state = await batchState(target, headers, batch.id);
  }
  const from = { at: performance.now(), done: state.request_counts.completed + state.request_counts.failed };
  let running = state.status === 'in_progress';
  const polling = (async () => {
    while (running) {
      await sleep(250);
      const now = await batchState(target, headers, batch.id);
      if (now.status !== 'in_progress') running = false;
    }
  })();
  const during = await probes(target, headers, model, online, (i) => running && i < BATCH_WHILE_ONLINE.duringProbes);
  state = await batchState(target, headers, batch.id);
  const rate =
    (state.request_counts.completed + state.request_counts.failed - from.done) / ((performance.now() - from.at) / 1000);
  running = false;
  await polling;
  if (!ended(state.status)) await fetch(`${target.url}/v1/batches/${batch.id}/cancel`, { method: 'POST', headers });
  const last = await untilEnded(target, headers, batch.id);
  if (last.status === 'failed' || last.status === 'expired') throw new Error(`the bench batch ended ${last.status}`);
  await fetch(`${target.url}/v1/files/${batch.fileId}`, { method: 'DELETE', headers });
  return { during, rate };
}

/** The workload on one gateway target, `repeats` times; its points and ratios. */
export async function runBatchWhileOnline(
  name: string,
  target: Target,
  headers: Record<string, string>,
  model: string,
  { repeats, inputs: count }: { repeats: number; inputs: number },
): Promise<{ points: HttpPoint[]; summary: BatchWhileOnlineSummary }> {
  const mix = embeddingMix(256);
  const runs: Measured[] = [];
  const p50 = (xs: number[]) => round(quantile(xs, 0.5), 1);
  for (let r = 0; r < repeats; r++) {
    // Inputs no earlier pass sent (a server with a cache would otherwise answer them from it).
    const tag = randomBytes(3).toString('hex');
    const inputs = (pass: string) =>
      Array.from({ length: count }, (_, i) => `[${tag}.${pass}.${i}] ${mix[i % mix.length]}`);
    const online = (pass: string) => mix.map((text, i) => `[${tag}.${pass}.${i}] ${text}`);
    const idleBefore = await probes(
      target,
      headers,
      model,
      online('idle-before'),
      (i) => i < BATCH_WHILE_ONLINE.idleProbes,
    );
    let http: { seconds: number; failed: number };
    let batch: { seconds: number; failed: number };
    if (r % 2 === 0) {
      http = await httpPass(target, headers, model, inputs('http'));
      batch = await batchAlone(target, headers, model, inputs('batch'));
    } else {
      batch = await batchAlone(target, headers, model, inputs('batch'));
      http = await httpPass(target, headers, model, inputs('http'));
    }
    const beside = await batchBesideOnline(target, headers, model, inputs('beside'), online('during'));
    const idleAfter = await probes(
      target,
      headers,
      model,
      online('idle-after'),
      (i) => i < BATCH_WHILE_ONLINE.idleProbes,
    );
    const run: Measured = {
      idle: [...idleBefore, ...idleAfter],
      during: beside.during,
      httpSeconds: http.seconds,
      httpFailed: http.failed,
      batchSeconds: batch.seconds,
      batchFailed: batch.failed,
      duringRate: beside.rate,
    };
    runs.push(run);
    log(
      `  ${name.padEnd(12)} batch-while-online repeat ${r + 1}/${repeats} (${count} inputs): ` +
        `online c=1 p50 idle ${p50(run.idle)} ms, during a batch ${p50(run.during)} ms (${run.during.length} requests): ` +
        `${round(quantile(run.during, 0.5) / quantile(run.idle, 0.5), 2)}x; ` +
        `batch alone ${round(count / run.batchSeconds, 1)} inputs/s, http c=${BATCH_WHILE_ONLINE.httpConcurrency} ` +
        `${round(count / run.httpSeconds, 1)} inputs/s: ${round(run.httpSeconds / run.batchSeconds, 2)}x; ` +
        `batch beside the online requests ${round(run.duringRate, 1)} inputs/s`,
    );
  }
  const point = (
    workload: string,
    concurrency: number,
    seconds: number[],
    rates: number[],
    latencies: number[][],
    failed: number,
  ): HttpPoint => ({
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
  });
  const busy = (latencies: number[]) => latencies.reduce((a, b) => a + b, 0) / 1000;
  const nothing = runs.map(() => [] as number[]);
  const points = [
    point(
      'online-c1-idle',
      1,
      runs.map((r) => busy(r.idle)),
      runs.map((r) => r.idle.length / busy(r.idle)),
      runs.map((r) => r.idle),
      0,
    ),
    point(
      'online-c1-during-batch',
      1,
      runs.map((r) => busy(r.during)),
      runs.map((r) => r.during.length / busy(r.during)),
      runs.map((r) => r.during),
      0,
    ),
    point(
      'http-c32-same-inputs',
      BATCH_WHILE_ONLINE.httpConcurrency,
      runs.map((r) => r.httpSeconds),
      runs.map((r) => count / r.httpSeconds),
      nothing,
      runs.reduce((a, r) => a + r.httpFailed, 0),
    ),
    point(
      'batch-alone',
      1,
      runs.map((r) => r.batchSeconds),
      runs.map((r) => count / r.batchSeconds),
      nothing,
      runs.reduce((a, r) => a + r.batchFailed, 0),
    ),
    point(
      'batch-during-online',
      1,
      runs.map((r) => busy(r.during)),
      runs.map((r) => r.duringRate),
      nothing,
      0,
    ),
  ];
  const latencyRatios = spread(runs.map((r) => quantile(r.during, 0.5) / quantile(r.idle, 0.5)));
  const throughputRatios = spread(runs.map((r) => r.httpSeconds / r.batchSeconds));
  const summary: BatchWhileOnlineSummary = {
    latencyRatio: round(latencyRatios.median, 2),
    throughputRatio: round(throughputRatios.median, 2),
    latencyRatios: roundSpread(latencyRatios, 2),
    throughputRatios: roundSpread(throughputRatios, 2),
    batchInputs: count,
    repeats,
  };
  const at = (workload: string) => points.find((p) => p.workload === workload)!;
  const range = (s: Spread | undefined) => (s && s.n > 1 ? ` [${s.min}-${s.max}]` : '');
  const met = (ok: boolean) => (ok ? 'met' : 'MISSED');
  log(
    `  ${name.padEnd(12)} batch-while-online, ${count} inputs, median of ${repeats} [range]:\n` +
      `    online c=1 p50: idle ${at('online-c1-idle').p50Ms.median} ms, during a batch ${at('online-c1-during-batch').p50Ms.median} ms: ` +
      `${summary.latencyRatio}x${range(summary.latencyRatios)} (target <= ${BATCH_WHILE_ONLINE.latencyTarget}: ` +
      `${met(summary.latencyRatio <= BATCH_WHILE_ONLINE.latencyTarget)})\n` +
      `    throughput: batch alone ${at('batch-alone').unitsPerSec.median} inputs/s, http c=${BATCH_WHILE_ONLINE.httpConcurrency} ` +
      `${at('http-c32-same-inputs').unitsPerSec.median} inputs/s: ${summary.throughputRatio}x${range(summary.throughputRatios)} ` +
      `(target >= ${BATCH_WHILE_ONLINE.throughputTarget}: ${met(summary.throughputRatio >= BATCH_WHILE_ONLINE.throughputTarget)})`,
  );
  return { points, summary };
}
