/**
 * Model churn: a server whose two models are loaded and unloaded again and again, through the admin
 * routes, with traffic between, and its memory after each cycle. It answers whether a load/unload
 * cycle leaves memory behind, in minutes rather than the hours a keep-alive soak takes.
 *
 * One cycle: load the embedder, send it `--requests` embeddings requests (`--concurrency` at a time),
 * unload it; then the same for the reranker. After each cycle the server's resident size, its threads
 * (from /proc) and its main thread's V8 heap and external memory (from /metrics) are recorded. The
 * server runs with preload off, the cache off and models kept until unloaded.
 *
 *   npm run build && npx tsx bench/churn.ts [--cycles 30] [--requests 200] [--concurrency 16]
 *     [--mode churn|traffic|unload] [--reference]
 *
 * `--mode traffic` keeps both models loaded and only sends the traffic (no unload); `--mode unload`
 * loads and unloads with no traffic. `--reference` ends with a fresh server that loads the last
 * cycle's model and takes the same traffic once: the size a churned server should come back to.
 * `--trim` asks the churned server's allocator, at the end, to return what it holds freed (glibc's
 * malloc_trim, called through gdb): what RSS shows and the allocator could give back is not a leak.
 * Whatever the environment sets for the allocator (MALLOC_ARENA_MAX, LD_PRELOAD) reaches the
 * server. Writes bench/results/churn-latest.json (or `--out`).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { commandLineFlags } from '../src/v8-flags.js';
import { allocatorEnvironment, machineInfo } from './lib/common.js';

const startedAt = new Date().toISOString();
const { values: args } = parseArgs({
  options: {
    cycles: { type: 'string', default: '30' },
    requests: { type: 'string', default: '200' },
    concurrency: { type: 'string', default: '16' },
    mode: { type: 'string', default: 'churn' },
    reference: { type: 'boolean', default: false },
    trim: { type: 'boolean', default: false },
    out: { type: 'string', default: 'bench/results/churn-latest.json' },
    'embed-model': { type: 'string', default: 'synthetic-all-MiniLM-L6-v2' },
    'rerank-model': { type: 'string', default: 'synthetic-ms-marco-MiniLM-L-6-v2' },
  },
});
const mode = args.mode;
if (!['churn', 'traffic', 'unload'].includes(mode))
  throw new Error(`--mode must be churn, traffic or unload; got "${mode}".`);
const cycles = Number(args.cycles);
const requests = Number(args.requests);
const concurrency = Number(args.concurrency);
const models = [args['embed-model'], args['rerank-model']];

interface Server {
  process: ChildProcess;
  base: string;
}

async function startServer(): Promise<Server> {
  const port = 20_000 + Math.floor(Math.random() * 2000);
  const child = spawn(process.execPath, [...commandLineFlags, 'dist/cli/index.js', 'serve'], {
    env: {
      ...process.env,
      ONNX_GATEWAY_PORT: String(port),
      ONNX_GATEWAY_HOST: '127.0.0.1',
      ONNX_GATEWAY_MODELS: models.join(','),
      ONNX_GATEWAY_PRELOAD: 'false',
      ONNX_GATEWAY_KEEP_ALIVE: '-1',
      ONNX_GATEWAY_CACHE_MAX_MB: '0',
      ONNX_GATEWAY_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const ready = await fetch(`${base}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) return { process: child, base };
    if (child.exitCode !== null) throw new Error(`the server exited with code ${child.exitCode}`);
    if (i > 600) throw new Error('the server did not become ready in 5 minutes');
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

async function stopServer(server: Server): Promise<void> {
  const exited = new Promise((resolve) => server.process.once('exit', resolve));
  server.process.kill('SIGTERM');
  await exited;
}

async function admin(server: Server, model: string, action: 'load' | 'unload'): Promise<void> {
  const response = await fetch(`${server.base}/v1/models/${model}/${action}`, { method: 'POST' });
  if (!response.ok) throw new Error(`${action} ${model}: ${response.status} ${await response.text()}`);
}

let serial = 0;
const words =
  'otters herons salmon glaciers volcanoes proteins enzymes neurons batteries turbines bridges sonnets'.split(' ');
/** A new text every time, so that nothing is answered from a cache. */
function text(length: number): string {
  const out = [`item ${serial++}`];
  for (let i = 0; i < length; i++) out.push(words[(serial * 7 + i * 3) % words.length]!);
  return out.join(' ');
}

let errors = 0;
/** `requests` requests for `model`, `concurrency` at a time. */
async function traffic(server: Server, model: string): Promise<void> {
  const rerank = model === args['rerank-model'];
  let left = requests;
  const client = async () => {
    while (left-- > 0) {
      const body = rerank
        ? { model, query: text(8), documents: Array.from({ length: 10 }, () => text(20 + (serial % 40))) }
        : { model, input: Array.from({ length: 1 + (serial % 8) }, () => text(10 + (serial % 40))) };
      const path = rerank ? '/v1/rerank' : '/v1/embeddings';
      const response = await fetch(`${server.base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }).catch(() => undefined);
      await response?.arrayBuffer();
      if (!response?.ok) errors++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, client));
}

interface Sample {
  cycle: number;
  s: number;
  rssMb: number;
  threads: number;
  heapUsedMb: number;
  externalMb: number;
}

function procStatus(server: Server): { rssMb: number; threads: number } {
  const status = readFileSync(`/proc/${server.process.pid}/status`, 'utf8');
  return {
    rssMb: Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024,
    threads: Number(/Threads:\s+(\d+)/.exec(status)![1]),
  };
}

async function sample(server: Server, cycle: number, started: number): Promise<Sample> {
  const metrics = await fetch(`${server.base}/metrics`).then((r) => r.text());
  const gauge = (name: string) => Number(new RegExp(`^\\S*${name} (\\S+)$`, 'm').exec(metrics)?.[1] ?? NaN) / 2 ** 20;
  const { rssMb, threads } = procStatus(server);
  return {
    cycle,
    s: Math.round((performance.now() - started) / 1000),
    rssMb: round(rssMb),
    threads,
    heapUsedMb: round(gauge('nodejs_heap_size_used_bytes')),
    externalMb: round(gauge('nodejs_external_memory_bytes')),
  };
}

/** Asks the server's allocator to return freed memory (glibc's malloc_trim, through gdb); its resident size after. */
function mallocTrim(server: Server): number {
  execFileSync('gdb', ['-p', String(server.process.pid), '-batch', '-ex', 'call (int) malloc_trim(0)'], {
    stdio: 'ignore',
  });
  return round(procStatus(server).rssMb);
}

const round = (x: number) => Math.round(x * 10) / 10;

/** Least-squares slope of `y` over `x`. */
function slope(points: { x: number; y: number }[]): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((a, p) => a + p.x, 0) / n;
  const my = points.reduce((a, p) => a + p.y, 0) / n;
  const num = points.reduce((a, p) => a + (p.x - mx) * (p.y - my), 0);
  const den = points.reduce((a, p) => a + (p.x - mx) ** 2, 0);
  return num / den;
}

const server = await startServer();
const started = performance.now();
const samples: Sample[] = [await sample(server, 0, started)];
if (mode === 'traffic') for (const model of models) await admin(server, model, 'load');
for (let cycle = 1; cycle <= cycles; cycle++) {
  for (const model of models) {
    if (mode !== 'traffic') await admin(server, model, 'load');
    if (mode !== 'unload') await traffic(server, model);
    if (mode !== 'traffic') await admin(server, model, 'unload');
  }
  samples.push(await sample(server, cycle, started));
  const last = samples.at(-1)!;
  process.stderr.write(
    `churn: cycle ${cycle} at ${last.s} s, rss ${last.rssMb} MB, threads ${last.threads}, heap ${last.heapUsedMb} MB, errors ${errors}\n`,
  );
}
// The state the reference is compared with: the last model loaded again and its traffic once.
const last = models.at(-1)!;
if (mode !== 'traffic') await admin(server, last, 'load');
await traffic(server, last);
const end = await sample(server, cycles + 1, started);
// What glibc's malloc would give back if asked: memory freed but kept in its arenas.
const trimmed = args.trim ? mallocTrim(server) : undefined;
await stopServer(server);

let reference: Sample | undefined;
if (args.reference) {
  const fresh = await startServer();
  await admin(fresh, last, 'load');
  await traffic(fresh, last);
  reference = await sample(fresh, 0, performance.now());
  await stopServer(fresh);
}

// After the first few cycles, once arenas and caches have reached their working size.
const settled = samples.filter((s) => s.cycle >= Math.min(5, Math.floor(cycles / 3)));
const result = {
  startedAt,
  machine: machineInfo(),
  allocator: allocatorEnvironment(),
  mode,
  cycles,
  requestsPerModel: requests,
  concurrency,
  models,
  errors,
  seconds: Math.round((performance.now() - started) / 1000),
  rssMb: {
    start: samples[0]!.rssMb,
    afterFirstCycle: samples[1]?.rssMb,
    end: end.rssMb,
    endAfterMallocTrim: trimmed ?? null,
    perCycleAfterSettling: round(slope(settled.map((s) => ({ x: s.cycle, y: s.rssMb })))),
    freshServerSameModel: reference?.rssMb ?? null,
    endOverFresh: reference ? round(end.rssMb / reference.rssMb) : null,
  },
  threads: { start: samples[0]!.threads, end: end.threads, fresh: reference?.threads ?? null },
  heapUsedMb: { start: samples[0]!.heapUsedMb, end: end.heapUsedMb },
  samples,
};
mkdirSync('bench/results', { recursive: true });
writeFileSync(args.out, `${JSON.stringify(result, null, 2)}\n`);
const { samples: _samples, ...summary } = result;
console.log(JSON.stringify(summary, null, 2));
