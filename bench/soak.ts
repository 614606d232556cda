/**
 * The soak: a server under steady mixed load for a long while, with the web reader under attack
 * beside it. `--connections` clients (128) send embeddings (1-8 inputs) and rerank (1 query x 10
 * documents) requests back to back, 3 to 1, every text new (the embedding cache is off, so every
 * input is inference); `--attackers` clients (4) ask the reader, again and again, for pages built to
 * be slow to parse, served from this process on loopback; `/health` is asked every 50 ms. At the
 * end it reports the embeddings and rerank answers by status (any non-2xx or failed request is an
 * error), the reader's answers, /health's latency percentiles, and the server's resident memory
 * (from /proc) sampled every 5 s: at the first minute, its highest after it, at the end, and the
 * slope after the first minute.
 *
 * With `--churn <seconds>` the models churn: every client asks the embedder for that many seconds,
 * then the reranker, and so on, and the server (preload off, `--keep-alive`, 5 s) unloads the model
 * left idle and loads the other on its first request; the loads and unloads are counted. The issue
 * of model churn was measured with `--churn 20 --connections 16 --attackers 0`.
 *
 *   npm run build && npx tsx bench/soak.ts [--minutes 10] [--connections 128] [--attackers 4]
 *     [--churn <seconds>] [--keep-alive 5s]
 *
 * Models come from ONNX_GATEWAY_MODELS_DIR (default .data/models), ids from --embed-model and
 * --rerank-model (default the synthetic MiniLM pair). The result records the machine and the C
 * allocator's settings from the environment (MALLOC_*, LD_PRELOAD), which the server inherits.
 * Writes bench/results/soak-latest.json (or `--out`).
 */
import { spawn } from 'node:child_process';
import { readFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { percentile } from '../src/vectors/percentile.js';
import { commandLineFlags } from '../src/v8-flags.js';
import { allocatorEnvironment, machineInfo } from './lib/common.js';

const startedAt = new Date().toISOString();
const { values: args } = parseArgs({
  options: {
    minutes: { type: 'string', default: '10' },
    connections: { type: 'string', default: '128' },
    attackers: { type: 'string', default: '4' },
    churn: { type: 'string', default: '0' },
    'keep-alive': { type: 'string', default: '5s' },
    out: { type: 'string', default: 'bench/results/soak-latest.json' },
    'embed-model': { type: 'string', default: 'synthetic-all-MiniLM-L6-v2' },
    'rerank-model': { type: 'string', default: 'synthetic-ms-marco-MiniLM-L-6-v2' },
  },
});
const durationMs = Number(args.minutes) * 60_000;
const connections = Number(args.connections);
const attackers = Number(args.attackers);
/** Seconds each model has the traffic to itself when the models churn; 0: both all the time. */
const churnMs = Number(args.churn) * 1000;

// Pages built to be slow to parse or large to hold: deep nesting, huge tables, whitespace runs, many links.
const hostilePages: Record<string, string> = {
  nested: `<html><body>${'<div><span>'.repeat(60_000)}deep${'</span></div>'.repeat(60_000)}</body></html>`,
  table: `<html><body><table>${'<tr><td>cell</td><td><a href="/x">link</a></td></tr>'.repeat(80_000)}</table></body></html>`,
  whitespace: `<html><body><p>${`a${' '.repeat(5000)}\n`.repeat(800)}</p></body></html>`,
  markup: `<html><body>${'<p>*_`[x](y)` ~~text~~ <em>em</em> <code>c</code></p>'.repeat(40_000)}</body></html>`,
};
const pageServer = createServer((request, response) => {
  const page = hostilePages[(request.url ?? '/').slice(1)] ?? hostilePages.nested!;
  response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  response.end(page);
});
await new Promise<void>((resolve) => pageServer.listen(0, '127.0.0.1', resolve));
const pagesAt = `http://127.0.0.1:${(pageServer.address() as AddressInfo).port}`;

const port = 18_000 + Math.floor(Math.random() * 2000);
const server = spawn(process.execPath, [...commandLineFlags, 'dist/cli/index.js', 'serve'], {
  env: {
    ...process.env,
    ONNX_GATEWAY_PORT: String(port),
    ONNX_GATEWAY_HOST: '127.0.0.1',
    ONNX_GATEWAY_MODELS: `${args['embed-model']},${args['rerank-model']}`,
    ONNX_GATEWAY_CACHE_MAX_MB: '0',
    ONNX_GATEWAY_READER_ALLOW_PRIVATE: 'true',
    ONNX_GATEWAY_LOG_LEVEL: 'warn',
    ...(churnMs > 0 ? { ONNX_GATEWAY_PRELOAD: 'false', ONNX_GATEWAY_KEEP_ALIVE: args['keep-alive'] } : {}),
  },
  stdio: ['ignore', 'ignore', 'inherit'],
});
const base = `http://127.0.0.1:${port}`;
for (let i = 0; ; i++) {
  const ready = await fetch(`${base}/health`).then(
    (r) => r.ok,
    () => false,
  );
  if (ready) break;
  if (i > 600) throw new Error('the server did not become ready in 5 minutes');
  await new Promise((resolve) => setTimeout(resolve, 500));
}

const words =
  'the of and to in a is that for it as was with be by on not he this are or his from at which but have an they you were her she there one all we their'.split(
    ' ',
  );
const topics =
  'otters herons salmon glaciers volcanoes proteins enzymes neurons batteries turbines bridges tunnels sonnets operas markets tariffs'.split(
    ' ',
  );
let serial = 0;
/** A new text every time: a number, then words. */
function text(length: number): string {
  const out = [`item ${serial++}`];
  for (let i = 0; i < length; i++)
    out.push(i % 5 === 0 ? topics[(serial + i) % topics.length]! : words[(serial * 7 + i * 3) % words.length]!);
  return out.join(' ');
}

const started = Date.now();
const until = started + durationMs;
const counts = {
  embeddings: new Map<string, number>(),
  rerank: new Map<string, number>(),
  reader: new Map<string, number>(),
};
const tally = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);
let errors = 0;
const errorSamples: string[] = [];

async function client(n: number): Promise<void> {
  while (Date.now() < until) {
    const rerank = churnMs > 0 ? Math.floor((Date.now() - started) / churnMs) % 2 === 1 : n % 4 === 3;
    const path = rerank ? '/v1/rerank' : '/v1/embeddings';
    const body = rerank
      ? {
          model: args['rerank-model'],
          query: text(8),
          documents: Array.from({ length: 10 }, () => text(30 + (serial % 50))),
        }
      : { model: args['embed-model'], input: Array.from({ length: 1 + (serial % 8) }, () => text(10 + (serial % 50))) };
    try {
      const response = await fetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const answer = await response.text();
      tally(rerank ? counts.rerank : counts.embeddings, String(response.status));
      if (!response.ok) {
        errors++;
        if (errorSamples.length < 10) errorSamples.push(`${path} ${response.status} ${answer.slice(0, 200)}`);
      }
    } catch (error) {
      errors++;
      tally(rerank ? counts.rerank : counts.embeddings, 'failed');
      if (errorSamples.length < 10) errorSamples.push(`${path} ${(error as Error).message}`);
    }
  }
}

async function attacker(n: number): Promise<void> {
  const names = Object.keys(hostilePages);
  for (let i = n; Date.now() < until; i++) {
    const response = await fetch(`${base}/v1/web-reader/read`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ url: `${pagesAt}/${names[i % names.length]}` }),
    }).catch(() => undefined);
    tally(counts.reader, response ? String(response.status) : 'failed');
    await response?.arrayBuffer();
  }
}

const health: number[] = [];
async function healthProbe(): Promise<void> {
  while (Date.now() < until) {
    const t0 = performance.now();
    const response = await fetch(`${base}/health`).catch(() => undefined);
    await response?.arrayBuffer();
    if (!response?.ok) {
      errors++;
      if (errorSamples.length < 10) errorSamples.push(`/health ${response?.status ?? 'failed'}`);
    }
    health.push(performance.now() - t0);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Loads and unloads of the models since start, from /metrics. */
async function lifecycleCounts(): Promise<{ loads: number; unloads: number }> {
  const metrics = await fetch(`${base}/metrics`).then((r) => r.text());
  const total = (name: string) =>
    [...metrics.matchAll(new RegExp(`^\\S*${name}\\{[^}]*\\} (\\S+)$`, 'gm'))].reduce((a, m) => a + Number(m[1]), 0);
  return { loads: total('model_loads_total'), unloads: total('model_unloads_total') };
}

const memory: { s: number; rssMb: number }[] = [];
const rssMb = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${server.pid}/status`, 'utf8'))![1]) / 1024;
const sampler = setInterval(() => {
  memory.push({ s: Math.round((Date.now() - started) / 1000), rssMb: Math.round(rssMb()) });
  const last = memory.at(-1)!;
  process.stderr.write(`soak: ${last.s} s, rss ${last.rssMb} MB, errors ${errors}\n`);
}, 5000);

await Promise.all([
  ...Array.from({ length: connections }, (_, n) => client(n)),
  ...Array.from({ length: attackers }, (_, n) => attacker(n)),
  healthProbe(),
]);
clearInterval(sampler);
const lifecycle = churnMs > 0 ? await lifecycleCounts() : undefined;
server.kill('SIGTERM');
pageServer.close();

const afterFirstMinute = memory.filter((m) => m.s >= 60);
const slope = (() => {
  const n = afterFirstMinute.length;
  if (n < 2) return 0;
  const mx = afterFirstMinute.reduce((a, m) => a + m.s, 0) / n;
  const my = afterFirstMinute.reduce((a, m) => a + m.rssMb, 0) / n;
  const num = afterFirstMinute.reduce((a, m) => a + (m.s - mx) * (m.rssMb - my), 0);
  const den = afterFirstMinute.reduce((a, m) => a + (m.s - mx) ** 2, 0);
  return (num / den) * 60;
})();
const sorted = [...health].sort((a, b) => a - b);
const result = {
  startedAt,
  machine: machineInfo(),
  allocator: allocatorEnvironment(),
  minutes: Number(args.minutes),
  connections,
  attackers,
  churn: churnMs > 0 ? { seconds: churnMs / 1000, keepAlive: args['keep-alive'], ...lifecycle } : null,
  models: [args['embed-model'], args['rerank-model']],
  errors,
  errorSamples,
  embeddings: Object.fromEntries(counts.embeddings),
  rerank: Object.fromEntries(counts.rerank),
  reader: Object.fromEntries(counts.reader),
  healthMs: { count: sorted.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted.at(-1) },
  rssMb: {
    atFirstMinute: afterFirstMinute[0]?.rssMb,
    maxAfterFirstMinute: Math.max(...afterFirstMinute.map((m) => m.rssMb)),
    atEnd: memory.at(-1)?.rssMb,
    slopeMbPerMinute: Number(slope.toFixed(2)),
  },
  memory,
};
mkdirSync('bench/results', { recursive: true });
writeFileSync(args.out, `${JSON.stringify(result, null, 2)}\n`);
const { memory: _samples, ...summary } = result;
console.log(JSON.stringify(summary, null, 2));
