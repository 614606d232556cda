/**
 * HTTP load against a pluggable list of target servers, from a load generator in its own process
 * (bench/http-load.ts, autocannon). Workloads:
 *   embed-1-float / embed-1-base64: one input per request, rotating through the mix
 *   embed-32-float: 32 inputs per request (windows of the mix)
 *   rerank-1x50: 1 query x 50 documents per request
 * at increasing concurrency; and, only when named in --workloads,
 *   reindex: 1,024 inputs in requests of 32 sent once (cold), again (warm), then with every other
 *            input new (half new), at a fixed concurrency: what the embedding cache saves a pipeline
 *            that re-indexes a corpus whose chunks mostly did not change (see runReindex);
 *   embed-image-224, embed-image-photo: one image a request as a data URI (bench/image-workloads.ts)
 *            to an image-text model (--image-model) at --image-concurrency (16), against raw ORT
 *            running its vision graph on the same images' pixel_values; the gateway's points also
 *            split a request's time by phase (its Server-Timing phases, read as /metrics sums).
 * Reports requests/s, inputs/s (pairs/s for rerank), p50/p99 latency, and non-2xx/errors. A target
 * is started by the bench (child process, GET /health polled until 200) or given as a URL.
 *
 * Built-in targets:
 *   gateway       `node dist/cli/index.js serve` (or `--gateway-from-src`: `node --import tsx src/cli/index.ts serve`),
 *                 without its embedding cache: the workloads repeat their inputs, and measure inference
 *   gateway-int8  the same serving the int8 variants (`<id>:int8`; made by `models quantize`)
 *   gateway-cache the gateway with its embedding cache on (256 MB), for the reindex workload
 *   gateway-traced the gateway with OpenTelemetry tracing on, every trace sampled, exporting
 *                 OTLP/HTTP protobuf to a receiver in the bench process that reads and drops it
 *   gateway@NODE  the gateway run by another node binary (Node 24 beside the bench's own, say), named
 *                 `gateway-node<major>`; `LABEL=gateway@NODE --v8-flag ...` names it LABEL and gives
 *                 node those flags too (a flag given to node is kept: src/v8-flags.ts)
 *   transformers  bench/peers/transformers-server.ts (fastify + transformers.js pipeline)
 *   minimal       bench/peers/minimal-server.ts (fastify + piscina, 1 input per run)
 *   ort, ort-int8 raw ONNX Runtime (bench/raw-target.ts), one target per layout that can win
 *                 (rawLayoutSet: cores x 1 thread and 1 x cores threads at batch 1, the ceiling sweep's
 *                 best), named `ort-<sessions>x<threads>-b<batch>`; at concurrency 1 each input alone
 *                 on one session of the layout's threads; all measured in the same rotation
 *   name=URL      an already running server
 */
import { type ChildProcess, execFileSync, fork, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  DEFAULT_EMBED_MODEL,
  DEFAULT_RERANK_MODEL,
  REPO_ROOT,
  type Spread,
  flagList,
  flagNumber,
  flagNumbers,
  flagString,
  log,
  machineInfo,
  median,
  modelDir,
  modelOnnxPath,
  modelsDir,
  parseFlags,
  processCpuMs,
  round,
  roundSpread,
  sleep,
  spawnNode,
  spread,
} from './lib/common.js';
import { BATCH_WHILE_ONLINE, runBatchWhileOnline, type BatchWhileOnlineSummary } from './batch-while-online.js';
import { embeddingMix, rerankMix } from './mix.js';
import { DEFAULT_IMAGE_MODEL, imageBodies, isImageWorkload, workloadImages } from './image-workloads.js';
import type { LoadJob, LoadResult } from './http-load.js';
import type { RawInit, RawJob, RawLayout, RawMessage } from './raw-target.js';
import { commandLineFlags } from '../src/v8-flags.js';

// ---------------------------------------------------------------------------------------------
// Targets

export interface RunningTarget {
  name: string;
  url: string;
  apiKey: string | null;
  stop(): Promise<void>;
  logTail(): string;
  /** The target's process, for its CPU account (absent for a URL target). */
  pid?: number;
  /** Raw ONNX Runtime: measured directly instead of by the load generator. */
  measure?(workload: Workload, concurrency: number, durationS: number): Promise<LoadResult>;
}
export interface TargetSpec {
  name: string;
  kind: 'gateway' | 'peer' | 'url' | 'raw';
  /** Which graphs it runs: ratios hold a target to raw ORT of its own variant (and int8 also to fp32). */
  variant: 'fp32' | 'int8';
  /** A raw target's layouts (sessions x intra-op threads x batch). */
  layouts?: RawLayouts;
  /** The Node version a gateway runs on, when not the bench's own. */
  node?: string;
  /** Model ids the workloads name for this target (the int8 gateway serves `<id>:int8`). */
  models: { embed: string; rerank: string; image?: string };
  /** The kinds of workload it measures (absent: embed and rerank); a raw target measures those it has layouts for. */
  kinds?: WorkloadKind[];
  start(): Promise<RunningTarget>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

async function waitHealthy(url: string, child: ChildProcess | null, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    if (child && child.exitCode !== null) throw new Error(`exited with code ${child.exitCode} before becoming healthy`);
    try {
      const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2000) });
      if (res.status === 200) return;
      last = `status ${res.status}`;
    } catch (error) {
      last = (error as Error).message;
    }
    await sleep(250);
  }
  throw new Error(`GET ${url}/health did not answer 200 within ${timeoutMs} ms (last: ${last})`);
}

function childTarget(name: string, child: ChildProcess, url: string, apiKey: string | null): RunningTarget {
  const tail: string[] = [];
  const keep = (chunk: Buffer): void => {
    tail.push(chunk.toString());
    while (tail.length > 50) tail.shift();
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return {
    name,
    url,
    apiKey,
    pid: child.pid,
    logTail: () => tail.join('').slice(-2000),
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      child.kill('SIGTERM');
      const timer = setTimeout(() => {
        if (child.exitCode === null) child.kill('SIGKILL');
      }, 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

export async function startChild(
  name: string,
  make: (port: number, apiKey: string) => ChildProcess,
  healthTimeoutMs: number,
): Promise<RunningTarget> {
  const port = await freePort();
  const apiKey = `bench-${randomBytes(12).toString('hex')}`;
  const child = make(port, apiKey);
  const url = `http://127.0.0.1:${port}`;
  const target = childTarget(name, child, url, apiKey);
  try {
    await waitHealthy(url, child, healthTimeoutMs);
  } catch (error) {
    await target.stop();
    throw new Error(`${name}: ${(error as Error).message}\n${target.logTail()}`, { cause: error });
  }
  return target;
}

export interface TargetOptions {
  embedModel: string;
  rerankModel: string;
  gatewayFromSrc: boolean;
  apiKey: string | null;
  /** The ceiling sweep's best layouts, measured as a raw target beside the batch-1 layouts (rawLayoutSet). */
  rawLayouts?: { fp32?: { embed: RawLayout; rerank: RawLayout }; int8?: { embed: RawLayout; rerank: RawLayout } };
  /** The kinds of workload the run measures (absent: embed and rerank). */
  kinds?: WorkloadKind[];
  /**
   * The image-text model of the image workloads, their names, the largest concurrency they run at, and
   * the accelerator both the gateway and raw ORT run its vision tower on (absent: the CPU).
   */
  images?: { model: string; workloads: string[]; maxConcurrency: number; device?: string };
}

/** Rerank requests of the HTTP workload (see workloads()). */
const RERANK_REQUESTS = 8;

/** Raw ONNX Runtime in a child process (bench/raw-target.ts), answering measurement jobs. */
async function startRaw(
  name: string,
  models: { embed: string; rerank: string },
  layouts: RawLayouts,
  n: number,
  images: TargetOptions['images'],
): Promise<RunningTarget> {
  const child = spawnNode(
    new URL(`./raw-target${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url),
    [],
    { ipc: true },
  );
  const target = childTarget(name, child, '', null);
  const waiters = new Map<number, (m: RawMessage) => void>();
  let ready: (() => void) | undefined;
  child.on('message', (m: RawMessage) => {
    if (m.type === 'ready') ready?.();
    else waiters.get(m.id)?.(m);
  });
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code) => reject(new Error(`${name} exited with code ${code}\n${target.logTail()}`))),
  );
  exited.catch(() => undefined);
  child.send({
    type: 'init',
    n,
    rerankRequests: RERANK_REQUESTS,
    ...(layouts.embed ? { embed: { id: models.embed, path: modelOnnxPath(models.embed), layout: layouts.embed } } : {}),
    ...(layouts.rerank
      ? { rerank: { id: models.rerank, path: modelOnnxPath(models.rerank), layout: layouts.rerank } }
      : {}),
    ...(layouts.image && images
      ? { image: { folder: modelDir(images.model), layout: layouts.image, workloads: images.workloads } }
      : {}),
  } satisfies RawInit);
  await Promise.race([
    new Promise<void>((r) => {
      ready = r;
    }),
    exited,
  ]);
  let nextId = 1;
  return {
    ...target,
    async stop() {
      if (child.exitCode === null && child.connected) child.send({ type: 'close' });
      await target.stop();
    },
    async measure(w, concurrency, durationS) {
      const id = nextId++;
      // At concurrency 1 a single-input request is held to one input run alone with every core.
      const kind = workloadKind(w);
      const mode = w.unitsPerRequest === 1 && concurrency === 1 && kind === 'embed' ? 'latency' : 'throughput';
      const job: RawJob = { type: 'measure', id, workload: kind, name: w.name, mode, durationS };
      const answer = new Promise<RawMessage>((r) => waiters.set(id, r));
      child.send(job);
      const m = await Promise.race([answer, exited]);
      waiters.delete(id);
      if (m.type !== 'result') throw new Error(`${name}: ${m.type === 'error' ? m.message : 'unexpected answer'}`);
      const ok = m.units / w.unitsPerRequest;
      return {
        id,
        durationS: m.durationS,
        ok,
        okPerSec: m.unitsPerSec / w.unitsPerRequest,
        non2xx: 0,
        errors: 0,
        timeouts: 0,
        statusCodes: {},
        latencyMs: m.latencyMs,
      };
    },
  };
}

const layoutName = (l: RawLayout): string => `${l.device ? `${l.device}-` : ''}${l.sessions}x${l.threads}-b${l.batch}`;
const sameLayout = (a: RawLayout | undefined, b: RawLayout | undefined): boolean =>
  a === b ||
  (a !== undefined && b !== undefined && a.sessions === b.sessions && a.threads === b.threads && a.batch === b.batch);

/** A raw target's layout for each kind of workload it measures. */
export type RawLayouts = Partial<Record<WorkloadKind, RawLayout>>;

/**
 * The layouts raw ORT is measured in beside the servers, each its own target: every layout that can
 * win on the machine. One session per core of one thread and one session of every core, both at
 * batch 1, and the ceiling sweep's best (batched) layout when it is another; for images (`imageBatch`:
 * the image workloads' largest concurrency, the most a server can batch), one session of every core
 * at that batch too. A server is held to the best of them at each point, so a layout that wins
 * today on this machine is never missed.
 */
export function rawLayoutSet(
  cores: number,
  sweepBest?: { embed: RawLayout; rerank: RawLayout },
  imageBatch?: number,
  imageDevice?: string,
): RawLayouts[] {
  const perCore: RawLayout = { sessions: cores, threads: 1, batch: 1 };
  const oneSession: RawLayout = { sessions: 1, threads: cores, batch: 1 };
  const onCpu = imageBatch !== undefined && imageDevice === undefined;
  const image = (layout: RawLayout) => (onCpu ? { image: layout } : {});
  const set: RawLayouts[] = [{ embed: perCore, rerank: perCore, ...image(perCore) }];
  if (cores > 1) set.push({ embed: oneSession, rerank: oneSession, ...image(oneSession) });
  if (sweepBest && !set.some((l) => sameLayout(l.embed, sweepBest.embed) && sameLayout(l.rerank, sweepBest.rerank)))
    set.push(sweepBest);
  if (onCpu && imageBatch > 1) set.push({ image: { sessions: 1, threads: cores, batch: imageBatch } });
  // On an accelerator one session runs everything (as the gateway places it): alone and at the largest batch.
  if (imageBatch !== undefined && imageDevice !== undefined) {
    const onDevice = (batch: number): RawLayout => ({ sessions: 1, threads: cores, batch, device: imageDevice });
    set.push({ image: onDevice(1) });
    if (imageBatch > 1) set.push({ image: onDevice(imageBatch) });
  }
  return set;
}

/** Another node binary to run the gateway on, with flags for it. */
interface OtherNode {
  execPath: string;
  nodeArgs: string[];
  /** Its version, recorded with the target's results. */
  node: string;
}

/** The gateway as a target (`gateway`, `gateway-int8`, `gateway-cache`, or on another node binary). */
function gatewaySpec(name: string, models: TargetSpec['models'], opts: TargetOptions, on?: OtherNode): TargetSpec {
  return {
    name,
    kind: 'gateway',
    variant: name === 'gateway-int8' ? 'int8' : 'fp32',
    ...(on ? { node: on.node } : {}),
    models,
    start: async () => {
      const traced = name === 'gateway-traced' ? { OTEL_EXPORTER_OTLP_ENDPOINT: await otlpSink() } : {};
      const cli = opts.gatewayFromSrc
        ? join(REPO_ROOT, 'src', 'cli', 'index.ts')
        : join(REPO_ROOT, 'dist', 'cli', 'index.js');
      if (!existsSync(cli))
        throw new Error(`gateway: ${cli} does not exist (run \`npm run build\`, or pass --gateway-from-src)`);
      // Started as npm start starts it: with the flags V8 takes only on node's command line.
      return startChild(
        name,
        (port, apiKey) =>
          spawn(
            on?.execPath ?? process.execPath,
            [
              ...commandLineFlags,
              ...(on?.nodeArgs ?? []),
              ...(opts.gatewayFromSrc ? ['--import', import.meta.resolve('tsx')] : []),
              cli,
              'serve',
            ],
            {
              cwd: REPO_ROOT,
              stdio: ['ignore', 'pipe', 'pipe'],
              env: {
                ...process.env,
                ONNX_GATEWAY_MODELS_DIR: modelsDir(),
                ONNX_GATEWAY_MODELS: servedModels(models, opts.kinds).join(','),
                // The ceiling and the peers cut a pair at 512 tokens; by default the gateway also scores
                // the further windows of longer documents. One window each keeps the work identical.
                ONNX_GATEWAY_RERANK_MAX_CHUNKS: process.env.ONNX_GATEWAY_RERANK_MAX_CHUNKS ?? '1',
                // The workloads send the same inputs again and again: only gateway-cache answers them from its cache.
                ONNX_GATEWAY_CACHE_MAX_MB: name === 'gateway-cache' ? '256' : '0',
                ONNX_GATEWAY_PORT: String(port),
                ONNX_GATEWAY_HOST: '127.0.0.1',
                ONNX_GATEWAY_API_KEYS: apiKey,
                ONNX_GATEWAY_LOG_LEVEL: process.env.ONNX_GATEWAY_LOG_LEVEL ?? 'warn',
                ...(opts.images?.device
                  ? { ONNX_GATEWAY_DEVICE_MAP: `${opts.images.model}=${opts.images.device}` }
                  : {}),
                ...traced,
              },
            },
          ),
        // A real-size model loads in minutes on a busy machine.
        600_000,
      );
    },
  };
}

let sink: Promise<string> | undefined;

/**
 * Where gateway-traced exports its spans: an OTLP/HTTP receiver in this process that reads each
 * export and answers 200, so that the gateway pays for making and sending its spans as it would
 * to a collector (the receiver's own work is the bench's, as the load generator's is).
 */
function otlpSink(): Promise<string> {
  sink ??= new Promise((resolve) => {
    const server = createHttpServer((request, response) => {
      request.resume();
      request.on('end', () => response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
    });
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`));
    server.unref();
  });
  return sink;
}

/** `n`: the embedding mix size, for the raw targets' inputs (the HTTP workloads' own). */
export function targetSpecs(names: string[], opts: TargetOptions & { n?: number }): TargetSpec[] {
  const fp32 = { embed: opts.embedModel, rerank: opts.rerankModel };
  return names.flatMap((name): TargetSpec | TargetSpec[] => {
    const onNode = /^(?:([\w.-]+)=)?gateway@(\S+)((?:\s+--\S+)*)$/.exec(name.trim());
    if (onNode) {
      const [, label, nodePath, flags] = onNode;
      const node = execFileSync(nodePath!, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
      return gatewaySpec(label ?? `gateway-node${node.split('.')[0]}`, fp32, opts, {
        execPath: nodePath!,
        nodeArgs: flags!.split(/\s+/).filter(Boolean),
        node,
      });
    }
    const eq = name.indexOf('=');
    if (eq > 0) {
      const label = name.slice(0, eq);
      const url = name.slice(eq + 1).replace(/\/$/, '');
      return {
        name: label,
        kind: 'url',
        variant: 'fp32',
        models: { ...fp32, image: opts.images?.model },
        async start() {
          await waitHealthy(url, null, 10_000);
          return { name: label, url, apiKey: opts.apiKey, stop: async () => {}, logTail: () => '' };
        },
      };
    }
    if (name === 'ort' || name === 'ort-int8') {
      const int8 = name === 'ort-int8';
      const models = int8 ? { embed: `${opts.embedModel}:int8`, rerank: `${opts.rerankModel}:int8` } : fp32;
      const kinds = opts.kinds ?? textKinds;
      const imageBatch = int8 ? undefined : opts.images?.maxConcurrency;
      const imageDevice = int8 ? undefined : opts.images?.device;
      return rawLayoutSet(
        machineInfo().cores,
        int8 ? opts.rawLayouts?.int8 : opts.rawLayouts?.fp32,
        imageBatch,
        imageDevice,
      )
        .map((all): RawLayouts =>
          Object.fromEntries(Object.entries(all).filter(([k]) => kinds.includes(k as WorkloadKind))),
        )
        .filter((layouts) => Object.keys(layouts).length > 0)
        .map((layouts) => {
          const named = [...new Set(Object.values(layouts).map(layoutName))];
          const target = `${name}-${named.join('+')}`;
          return {
            name: target,
            kind: 'raw',
            variant: int8 ? 'int8' : 'fp32',
            layouts,
            kinds: Object.keys(layouts) as WorkloadKind[],
            models: { ...models, image: opts.images?.model },
            start: () => startRaw(target, models, layouts, opts.n ?? 256, opts.images),
          };
        });
    }
    if (name === 'gateway' || name === 'gateway-int8' || name === 'gateway-cache' || name === 'gateway-traced') {
      const models =
        name === 'gateway-int8' ? { embed: `${opts.embedModel}:int8`, rerank: `${opts.rerankModel}:int8` } : fp32;
      return gatewaySpec(name, { ...models, image: opts.images?.model }, opts);
    }
    const peerFile = { transformers: './peers/transformers-server', minimal: './peers/minimal-server' }[name];
    if (!peerFile)
      throw new Error(
        `unknown target "${name}" (gateway, gateway-int8, gateway-cache, gateway-traced, gateway@NODE, transformers, minimal, ort, ort-int8, or name=URL)`,
      );
    const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
    return {
      name,
      kind: 'peer',
      variant: 'fp32',
      models: fp32,
      start: () =>
        startChild(
          name,
          (port, apiKey) =>
            spawnNode(
              new URL(peerFile + ext, import.meta.url),
              ['--port', String(port), '--embed-model', opts.embedModel, '--rerank-model', opts.rerankModel],
              { env: { ...process.env, BENCH_API_KEY: apiKey } },
            ),
          180_000,
        ),
    };
  });
}

// ---------------------------------------------------------------------------------------------
// Workloads

export type WorkloadKind = 'embed' | 'rerank' | 'image';
const textKinds: WorkloadKind[] = ['embed', 'rerank'];

/** What a workload runs: texts to embed, pairs to rerank, or images to embed. */
export const workloadKind = (w: Pick<Workload, 'unit'>): WorkloadKind =>
  w.unit === 'pairs' ? 'rerank' : w.unit === 'images' ? 'image' : 'embed';

/** The models a gateway serves for the kinds of workload a run measures. */
function servedModels(models: TargetSpec['models'], kinds: WorkloadKind[] = textKinds): string[] {
  return [
    ...(kinds.includes('embed') ? [models.embed] : []),
    ...(kinds.includes('rerank') ? [models.rerank] : []),
    ...(kinds.includes('image') && models.image ? [models.image] : []),
  ];
}

export interface Workload {
  name: string;
  path: string;
  unit: 'inputs' | 'pairs' | 'images';
  unitsPerRequest: number;
  concurrency: number[];
  bodies: string[];
}

export interface WorkloadOptions {
  n: number;
  single: number[];
  batch: number[];
  rerank: number[];
  embedModel: string;
  rerankModel: string;
  /** The image workloads' concurrency levels, model and images (made once, before any target starts). */
  image?: number[];
  imageModel?: string;
  /** `--image-device`: the accelerator of the image model, for the gateway and raw ORT alike. */
  imageDevice?: string;
  imageFiles?: Record<string, Uint8Array[]>;
}

/** Requests a point should complete at least, so that its rate is not a count of a handful of answers. */
const minCompletions = 12;

export function workloads(o: WorkloadOptions): Workload[] {
  const texts = embeddingMix(o.n);
  const single = (format: 'float' | 'base64'): string[] =>
    texts.map((t) => JSON.stringify({ model: o.embedModel, input: t, encoding_format: format }));
  const windows: string[] = [];
  for (let s = 0; s < texts.length; s += 8) {
    const input = Array.from({ length: 32 }, (_, k) => texts[(s + k) % texts.length]);
    windows.push(JSON.stringify({ model: o.embedModel, input, encoding_format: 'float' }));
  }
  const reranks = rerankMix(RERANK_REQUESTS).map((r) =>
    JSON.stringify({ model: o.rerankModel, query: r.query, documents: r.documents }),
  );
  const images = Object.entries(o.imageFiles ?? {}).map(([name, encoded]) => ({
    name,
    path: '/v1/embeddings',
    unit: 'images',
    unitsPerRequest: 1,
    concurrency: o.image ?? [16],
    bodies: imageBodies(o.imageModel!, encoded),
  }));
  return [
    {
      name: 'embed-1-float',
      path: '/v1/embeddings',
      unit: 'inputs',
      unitsPerRequest: 1,
      concurrency: o.single,
      bodies: single('float'),
    },
    {
      name: 'embed-1-base64',
      path: '/v1/embeddings',
      unit: 'inputs',
      unitsPerRequest: 1,
      concurrency: o.single,
      bodies: single('base64'),
    },
    {
      name: 'embed-32-float',
      path: '/v1/embeddings',
      unit: 'inputs',
      unitsPerRequest: 32,
      concurrency: o.batch,
      bodies: windows,
    },
    {
      name: 'rerank-1x50',
      path: '/v1/rerank',
      unit: 'pairs',
      unitsPerRequest: 50,
      concurrency: o.rerank,
      bodies: reranks,
    },
    ...images,
  ].filter((w) => w.concurrency.length > 0) as Workload[];
}

/** One request of the workload, checked for the expected shape. */
async function validate(t: RunningTarget, w: Workload): Promise<{ error: string | null; ms: number }> {
  const t0 = performance.now();
  const error = await check(t, w);
  return { error, ms: performance.now() - t0 };
}

async function check(t: RunningTarget, w: Workload): Promise<string | null> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (t.apiKey) headers.authorization = `Bearer ${t.apiKey}`;
  try {
    const res = await fetch(t.url + w.path, {
      method: 'POST',
      headers,
      body: w.bodies[1 % w.bodies.length],
      signal: AbortSignal.timeout(120_000),
    });
    const text = await res.text();
    if (res.status !== 200) return `status ${res.status}: ${text.slice(0, 300)}`;
    const body = JSON.parse(text) as {
      data?: Array<{ embedding: unknown; index: number }>;
      results?: Array<{ index: number; relevance_score: number }>;
    };
    if (w.path === '/v1/rerank') {
      if (!Array.isArray(body.results) || body.results.length !== 50)
        return `expected 50 rerank results, got ${body.results?.length}`;
      if (body.results.some((r) => typeof r.index !== 'number' || typeof r.relevance_score !== 'number'))
        return 'rerank results lack index/relevance_score';
      return null;
    }
    if (!Array.isArray(body.data) || body.data.length !== w.unitsPerRequest)
      return `expected ${w.unitsPerRequest} embeddings, got ${body.data?.length}`;
    const e = body.data[0]!.embedding;
    if (w.name.includes('base64')) {
      if (typeof e !== 'string' || Buffer.from(e, 'base64').length % 4 !== 0 || Buffer.from(e, 'base64').length === 0)
        return 'base64 embedding is not float32 bytes';
    } else if (!Array.isArray(e) || e.length === 0 || typeof e[0] !== 'number')
      return 'float embedding is not an array of numbers';
    return null;
  } catch (error) {
    return (error as Error).message;
  }
}

/** The kinds of the run's workloads a target measures: a raw target those it has layouts for, peers texts only. */
const measures = (spec: TargetSpec, kinds: WorkloadKind[]): WorkloadKind[] =>
  spec.kinds ?? (spec.kind === 'gateway' || spec.kind === 'url' ? kinds : kinds.filter((k) => k !== 'image'));

/** The model a tiny text request goes to: the embedder, or an image-text model's text tower where only that is served. */
const pingModel = (spec: TargetSpec): string =>
  spec.models.image && !(spec.kinds ?? textKinds).includes('embed') ? spec.models.image : spec.models.embed;

/**
 * The Server-Timing phases of a route's requests so far, summed, from the target's /metrics
 * (onnx_gateway_request_phase_seconds): read before and after a point, their difference over the
 * count is the mean ms per request of each phase; null when the target has no such metrics.
 */
async function phaseTotals(
  t: RunningTarget,
  route: string,
): Promise<Map<string, { sum: number; count: number }> | null> {
  try {
    const headers: Record<string, string> = t.apiKey ? { authorization: `Bearer ${t.apiKey}` } : {};
    const res = await fetch(`${t.url}/metrics`, { headers, signal: AbortSignal.timeout(10_000) });
    if (res.status !== 200) return null;
    const totals = new Map<string, { sum: number; count: number }>();
    const line = /^onnx_gateway_request_phase_seconds_(sum|count)\{([^}]*)\} (\S+)$/;
    for (const text of (await res.text()).split('\n')) {
      const m = line.exec(text);
      if (!m || !m[2]!.includes(`route="${route}"`)) continue;
      const phase = /phase="([^"]+)"/.exec(m[2]!)?.[1];
      if (!phase) continue;
      const entry = totals.get(phase) ?? { sum: 0, count: 0 };
      if (m[1] === 'sum') entry.sum = Number(m[3]) * 1000;
      else entry.count = Number(m[3]);
      totals.set(phase, entry);
    }
    return totals;
  } catch {
    return null;
  }
}

/** Mean ms per request of each phase between two phaseTotals readings. */
function phaseMeans(
  before: Map<string, { sum: number; count: number }>,
  after: Map<string, { sum: number; count: number }>,
): Record<string, number> {
  const means: Record<string, number> = {};
  for (const [phase, { sum, count }] of after) {
    const was = before.get(phase) ?? { sum: 0, count: 0 };
    if (count > was.count) means[phase] = (sum - was.sum) / (count - was.count);
  }
  return means;
}

/**
 * Waits until the server has finished the requests the load generator abandoned at the end of a run
 * (a server that can not cancel keeps computing them): a tiny request must come back about as fast
 * as on an idle server.
 */
async function waitIdle(t: RunningTarget, embedModel: string, idleMs: number, capMs = 120_000): Promise<number> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (t.apiKey) headers.authorization = `Bearer ${t.apiKey}`;
  const body = JSON.stringify({ model: embedModel, input: 'ping' });
  const t0 = performance.now();
  while (performance.now() - t0 < capMs) {
    const s = performance.now();
    try {
      await (
        await fetch(`${t.url}/v1/embeddings`, { method: 'POST', headers, body, signal: AbortSignal.timeout(capMs) })
      ).arrayBuffer();
    } catch {
      /* retry */
    }
    const ms = performance.now() - s;
    if (ms <= idleMs) break;
  }
  return performance.now() - t0;
}

// ---------------------------------------------------------------------------------------------
// Load generator process

export class LoadGenerator {
  private readonly child: ChildProcess;
  private nextId = 1;
  private readonly pending = new Map<number, (r: LoadResult) => void>();

  constructor() {
    const file = new URL(`./http-load${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url);
    this.child = fork(fileURLToPath(file), [], {
      cwd: REPO_ROOT,
      execArgv: file.pathname.endsWith('.ts') ? ['--import', import.meta.resolve('tsx')] : [],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.child.on('message', (r: LoadResult) => {
      const done = this.pending.get(r.id);
      this.pending.delete(r.id);
      done?.(r);
    });
  }

  run(job: Omit<LoadJob, 'id'>): Promise<LoadResult> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const onExit = (): void => {
        this.pending.delete(id);
        reject(new Error('load generator exited'));
      };
      this.child.once('exit', onExit);
      this.pending.set(id, (r) => {
        this.child.off('exit', onExit);
        resolve(r);
      });
      this.child.send({ ...job, id } satisfies LoadJob);
    });
  }

  close(): void {
    this.child.disconnect();
  }
}

// ---------------------------------------------------------------------------------------------

export interface HttpPoint {
  target: string;
  workload: string;
  unit: 'inputs' | 'pairs' | 'images';
  concurrency: number;
  durationS: number;
  requestsPerSec: Spread;
  unitsPerSec: Spread;
  p50Ms: Spread;
  p99Ms: Spread;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  /**
   * Where the CPU went during the point, in % of one core (median of repeats): the target's main
   * thread, its other threads (workers, ONNX Runtime), and the load generator. Linux only.
   */
  cpuPct?: { main: number; other: number; loadGen: number };
  /** reindex: inputs of the pass the server said it served from its cache (`x-cache-hits`, median of repeats; absent: no header). */
  cacheHits?: number;
  /**
   * The same account per answered request and per unit (median of repeats): the main thread's CPU ms
   * per request (a server's event loop: HTTP, JSON, tokenising, scheduling), and units per second of
   * CPU of the threads that run the model (a server's workers; every thread of a raw target).
   */
  cpuPerRequestMs?: {
    main: number;
    other: number;
    /** The main thread's CPU ms per request in each repeat, in order (the spread behind `main`). */
    mainByRepeat?: number[];
  };
  unitsPerWorkerCoreSecond?: number;
  /**
   * Image workloads on the gateway: mean ms per request of each Server-Timing phase (parse, base64,
   * header on the main thread; queue; preprocess and inference in the workers), from the target's
   * /metrics before and after the point (median of repeats).
   */
  phasesMs?: Record<string, number>;
}

export interface HttpTargetResult {
  name: string;
  kind: string;
  url: string | null;
  error: string | null;
  variant: 'fp32' | 'int8';
  /** A raw target's layouts. */
  layouts?: RawLayouts;
  /** The Node version a gateway ran on, when not the bench's own (machine.node). */
  node?: string;
  /** latency of a 1-token request on the idle server, ms */
  idlePingMs: number | null;
  /** batch-while-online: online p50 during a batch over idle, and the batch's rate over c=32 HTTP's (medians of repeats). */
  batchWhileOnline?: BatchWhileOnlineSummary;
  validation: Record<string, string | null>;
  points: HttpPoint[];
  /** points above the lowest concurrency not run because the expected latency exceeded maxDurationS / 3 (saturated well before) */
  skipped: Array<{ workload: string; concurrency: number; expectedLatencyS: number }>;
}

export interface HttpOptions extends TargetOptions, WorkloadOptions {
  targets: string[];
  durationS: number;
  warmupS: number;
  repeats: number;
  maxDurationS: number;
  only?: string[];
  /** batch-while-online: inputs of the batch (and of the HTTP pass beside it). */
  batchInputs?: number;
}

export function httpDefaults(
  quick: boolean,
): Omit<HttpOptions, 'embedModel' | 'rerankModel' | 'gatewayFromSrc' | 'apiKey'> {
  return quick
    ? {
        targets: ['gateway', 'transformers', 'minimal', 'ort'],
        n: 64,
        single: [1, 8, 32],
        batch: [1, 8],
        rerank: [1, 4],
        image: [16],
        durationS: 3,
        warmupS: 1,
        repeats: 1,
        maxDurationS: 20,
      }
    : {
        targets: ['gateway', 'transformers', 'minimal', 'ort'],
        n: 256,
        single: [1, 8, 32, 128],
        batch: [1, 8, 32],
        rerank: [1, 4, 16],
        image: [16],
        durationS: 10,
        warmupS: 3,
        repeats: 3,
        maxDurationS: 90,
      };
}

/**
 * All targets run at once (an idle server costs nothing) and every point is measured on each target
 * in turn, the order rotating with each repeat: on a shared machine whose speed drifts, targets are
 * then compared over the same minutes rather than one after the other.
 */
export async function runHttp(options: HttpOptions): Promise<HttpTargetResult[]> {
  // Image workloads run only when named; the text models are loaded only when a text workload runs.
  const imageNames = (options.only ?? []).filter(isImageWorkload);
  const kinds: WorkloadKind[] = [
    ...(options.only && options.only.every(isImageWorkload) ? [] : textKinds),
    ...(imageNames.length > 0 ? (['image'] as const) : []),
  ];
  const imageModel = options.imageModel ?? DEFAULT_IMAGE_MODEL;
  const opts: HttpOptions = {
    ...options,
    kinds,
    imageModel,
    imageFiles: Object.fromEntries(
      await Promise.all(imageNames.map(async (n): Promise<[string, Uint8Array[]]> => [n, await workloadImages(n)])),
    ),
    images:
      imageNames.length > 0
        ? {
            model: imageModel,
            workloads: imageNames,
            maxConcurrency: Math.max(...(options.image ?? [16])),
            ...(options.imageDevice ? { device: options.imageDevice } : {}),
          }
        : undefined,
  };
  const specs = targetSpecs(opts.targets, opts);
  const gen = new LoadGenerator();
  const out: HttpTargetResult[] = [];
  const live: Array<{
    spec: TargetSpec;
    target: RunningTarget;
    result: HttpTargetResult;
    headers: Record<string, string>;
    idleMs: number;
    wls: Workload[];
  }> = [];
  try {
    for (const spec of specs) {
      const result: HttpTargetResult = {
        name: spec.name,
        kind: spec.kind,
        variant: spec.variant,
        layouts: spec.layouts,
        ...(spec.node ? { node: spec.node } : {}),
        url: null,
        error: null,
        idlePingMs: null,
        validation: {},
        points: [],
        skipped: [],
      };
      out.push(result);
      let target: RunningTarget;
      try {
        log(`http: starting ${spec.name}`);
        target = await spec.start();
      } catch (error) {
        result.error = (error as Error).message;
        log(`http: ${spec.name} skipped: ${result.error.split('\n')[0]}`);
        continue;
      }
      result.url = target.url;
      const entry = {
        spec,
        target,
        result,
        headers: (target.apiKey ? { authorization: `Bearer ${target.apiKey}` } : {}) as Record<string, string>,
        idleMs: 0,
        wls: workloads({ ...opts, embedModel: spec.models.embed, rerankModel: spec.models.rerank }).filter(
          (w) => (!opts.only || opts.only.includes(w.name)) && measures(spec, kinds).includes(workloadKind(w)),
        ),
      };
      live.push(entry);
      if (target.measure) continue;
      // Idle latency of a tiny request: the yardstick of waitIdle.
      await waitIdle(target, pingModel(spec), Infinity);
      const idleSamples: number[] = [];
      for (let i = 0; i < 5; i++) {
        const t0 = performance.now();
        await waitIdle(target, pingModel(spec), Infinity);
        idleSamples.push(performance.now() - t0);
      }
      entry.idleMs = Math.max(50, 3 * Math.min(...idleSamples));
      result.idlePingMs = round(Math.min(...idleSamples), 2);
    }

    const names = [...new Set(live.flatMap((l) => l.wls.map((w) => w.name)))];
    for (const name of names) {
      // Per target: the workload (its bodies name the target's models), and the last measured rate.
      const runs = live.flatMap((l) => {
        const w = l.wls.find((x) => x.name === name);
        return w ? [{ ...l, w, oneMs: 0, unitsRate: 0, ok: true }] : [];
      });
      for (const run of runs) {
        // Raw targets warm their sessions at start and have nothing to validate.
        if (run.target.measure) {
          run.result.validation[name] = null;
          continue;
        }
        const { error: invalid, ms } = await validate(run.target, run.w);
        run.result.validation[name] = invalid;
        run.oneMs = ms;
        if (invalid) {
          run.ok = false;
          log(`http: ${run.spec.name} ${name} failed validation: ${invalid}`);
          continue;
        }
        // Warm-up at concurrency 2 (JIT, arenas, connection setup), then let the server drain.
        await gen.run({
          url: run.target.url,
          path: run.w.path,
          bodies: run.w.bodies,
          connections: 2,
          durationS: Math.max(opts.warmupS, Math.ceil(Math.min((2 * ms) / 1000, opts.maxDurationS / 2))),
          timeoutS: 120,
          headers: run.headers,
        });
        await waitIdle(run.target, pingModel(run.spec), run.idleMs);
      }
      const concurrency = runs[0]?.w.concurrency ?? [];
      for (const c of concurrency) {
        const active = runs.filter((run) => {
          if (!run.ok) return false;
          if (run.target.measure) return true;
          // Expected latency at this concurrency: Little's law on the last point, else c x one unloaded request.
          const estLatencyS = run.unitsRate > 0 ? (c * run.w.unitsPerRequest) / run.unitsRate : (c * run.oneMs) / 1000;
          if (c !== concurrency[0] && estLatencyS > opts.maxDurationS / 3) {
            run.result.skipped.push({ workload: name, concurrency: c, expectedLatencyS: round(estLatencyS, 1) });
            log(
              `  ${run.spec.name.padEnd(12)} ${name.padEnd(15)} c=${String(c).padStart(3)} skipped: expected latency ${round(estLatencyS, 1)} s`,
            );
            return false;
          }
          return true;
        });
        // One duration for every target at this point: the longest any of them needs.
        const durationS = Math.ceil(
          Math.min(
            opts.maxDurationS,
            Math.max(
              opts.durationS,
              ...active
                .filter((run) => !run.target.measure)
                .map((run) => {
                  const estLatencyS =
                    run.unitsRate > 0 ? (c * run.w.unitsPerRequest) / run.unitsRate : (c * run.oneMs) / 1000;
                  return Math.max(4 * estLatencyS, (minCompletions * estLatencyS) / c);
                }),
            ),
          ),
        );
        const reps = new Map<(typeof runs)[number], LoadResult[]>(active.map((run) => [run, []]));
        const cpu = new Map<
          (typeof runs)[number],
          Array<{
            main: number;
            other: number;
            loadGen: number;
            mainMsPerRequest: number;
            otherMsPerRequest: number;
            unitsPerWorkerCoreSecond: number;
          }>
        >(active.map((run) => [run, []]));
        const phases = new Map<(typeof runs)[number], Array<Record<string, number>>>(active.map((run) => [run, []]));
        for (let r = 0; r < opts.repeats; r++) {
          const order = active.map((_, i) => active[(i + r) % active.length]!);
          for (const run of order) {
            // An image workload's phases on a gateway, read outside the CPU account's window.
            const split = run.spec.kind === 'gateway' && workloadKind(run.w) === 'image';
            const phasesBefore = split ? await phaseTotals(run.target, run.w.path) : null;
            const before = run.target.pid ? processCpuMs(run.target.pid) : null;
            const t0 = performance.now();
            const result = run.target.measure
              ? await run.target.measure(run.w, c, durationS)
              : await gen.run({
                  url: run.target.url,
                  path: run.w.path,
                  bodies: run.w.bodies,
                  connections: c,
                  durationS,
                  timeoutS: Math.max(60, durationS * 2),
                  headers: run.headers,
                });
            const wallMs = performance.now() - t0;
            const after = run.target.pid ? processCpuMs(run.target.pid) : null;
            const phasesAfter = phasesBefore ? await phaseTotals(run.target, run.w.path) : null;
            if (phasesBefore && phasesAfter) phases.get(run)!.push(phaseMeans(phasesBefore, phasesAfter));
            reps.get(run)!.push(result);
            if (before && after && result.ok > 0) {
              const main = after.main - before.main;
              const other = after.other - before.other;
              // A raw target's model runs on all of its threads; a server's on its workers.
              const modelMs = run.target.measure ? main + other : other;
              cpu.get(run)!.push({
                main: (main / wallMs) * 100,
                other: (other / wallMs) * 100,
                loadGen: result.loadGenCpuPct ?? 0,
                mainMsPerRequest: main / result.ok,
                otherMsPerRequest: other / result.ok,
                unitsPerWorkerCoreSecond: modelMs > 0 ? (result.ok * run.w.unitsPerRequest) / (modelMs / 1000) : 0,
              });
            }
            if (!run.target.measure) await waitIdle(run.target, pingModel(run.spec), run.idleMs);
          }
        }
        for (const run of active) {
          const results = reps.get(run)!;
          const failed = results.find((x) => x.error);
          if (failed) log(`http: ${run.spec.name} ${name} c=${c}: ${failed.error}`);
          const rps = results.map((x) => x.okPerSec);
          const p: HttpPoint = {
            target: run.spec.name,
            workload: name,
            unit: run.w.unit,
            concurrency: c,
            durationS,
            requestsPerSec: roundSpread(spread(rps), 2),
            unitsPerSec: roundSpread(spread(rps.map((x) => x * run.w.unitsPerRequest)), 1),
            p50Ms: roundSpread(spread(results.map((x) => x.latencyMs.p50)), 1),
            p99Ms: roundSpread(spread(results.map((x) => x.latencyMs.p99)), 1),
            non2xx: results.reduce((a, x) => a + x.non2xx, 0),
            errors: results.reduce((a, x) => a + x.errors, 0),
            timeouts: results.reduce((a, x) => a + x.timeouts, 0),
            statusCodes: results.reduce<Record<string, number>>((acc, x) => {
              for (const [k, v] of Object.entries(x.statusCodes)) acc[k] = (acc[k] ?? 0) + v;
              return acc;
            }, {}),
          };
          const used = cpu.get(run)!;
          if (used.length) {
            p.cpuPct = {
              main: round(median(used.map((u) => u.main)), 0),
              other: round(median(used.map((u) => u.other)), 0),
              loadGen: round(median(used.map((u) => u.loadGen)), 0),
            };
            p.cpuPerRequestMs = {
              main: round(median(used.map((u) => u.mainMsPerRequest)), 2),
              other: round(median(used.map((u) => u.otherMsPerRequest)), 2),
              mainByRepeat: used.map((u) => round(u.mainMsPerRequest, 2)),
            };
            p.unitsPerWorkerCoreSecond = round(median(used.map((u) => u.unitsPerWorkerCoreSecond)), 1);
          }
          const split = phases.get(run)!;
          if (split.length > 0) {
            const names = [...new Set(split.flatMap((s) => Object.keys(s)))];
            p.phasesMs = Object.fromEntries(
              names.map((phase) => [phase, round(median(split.map((s) => s[phase] ?? 0)), 2)]),
            );
          }
          run.unitsRate = p.unitsPerSec.median;
          run.result.points.push(p);
          log(
            `  ${run.spec.name.padEnd(12)} ${name.padEnd(15)} c=${String(c).padStart(3)} ${String(round(p.unitsPerSec.median, 1)).padStart(7)} ${run.w.unit}/s ` +
              `${String(p.requestsPerSec.median).padStart(7)} req/s p50 ${p.p50Ms.median} ms p99 ${p.p99Ms.median} ms` +
              `${p.non2xx || p.errors ? ` (non-2xx ${p.non2xx}, errors ${p.errors})` : ''}`,
          );
        }
      }
    }
    if (opts.only?.includes('reindex'))
      await runReindex(
        live.filter((l) => !l.target.measure),
        opts,
      );
    if (opts.only?.includes('batch-while-online'))
      for (const l of live.filter((l) => l.spec.kind === 'gateway')) {
        const measured = await runBatchWhileOnline(l.spec.name, l.target, l.headers, l.spec.models.embed, {
          repeats: opts.repeats,
          inputs: opts.batchInputs ?? BATCH_WHILE_ONLINE.inputs,
        });
        l.result.points.push(...measured.points);
        l.result.batchWhileOnline = measured.summary;
      }
  } finally {
    gen.close();
    for (const l of live) await l.target.stop();
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The re-index workload

/** Inputs of one re-index pass, per request, and requests in flight. */
export const REINDEX = { inputs: 1024, perRequest: 32, concurrency: 4 } as const;

/**
 * The inputs of the three passes of one repeat: the mix, each input made unique by a numbered
 * prefix with this run's and repeat's tag (so that the cold pass is cold, on a server left running
 * too). The half-new pass changes every other pair of inputs (their prefix): half the claims and half
 * the passages, so half the tokens, and without a cache every pass is the same work.
 */
export function reindexPasses(tag: string): Array<{ name: string; inputs: string[] }> {
  const texts = embeddingMix(REINDEX.inputs);
  const corpus = texts.map((text, i) => `[${tag}.${i}] ${text}`);
  // The mix alternates claims and passages: changing every other input would change every passage.
  const changed = texts.map((text, i) => ((i >> 1) % 2 === 0 ? corpus[i]! : `[${tag}.${i}b] ${text}`));
  return [
    { name: 'reindex-cold', inputs: corpus },
    { name: 'reindex-warm', inputs: corpus },
    { name: 'reindex-half-new', inputs: changed },
  ];
}

/** One pass: every input in requests of 32, 4 in flight; wall time, latencies and the cache hits the server reported. */
async function reindexPass(
  t: RunningTarget,
  headers: Record<string, string>,
  model: string,
  inputs: string[],
): Promise<{ seconds: number; latencies: number[]; hits: number | undefined; failed: number }> {
  const bodies: string[] = [];
  for (let i = 0; i < inputs.length; i += REINDEX.perRequest) {
    bodies.push(JSON.stringify({ model, input: inputs.slice(i, i + REINDEX.perRequest), encoding_format: 'base64' }));
  }
  const latencies: number[] = [];
  let hits: number | undefined;
  let failed = 0;
  let next = 0;
  const started = performance.now();
  const client = async () => {
    while (next < bodies.length) {
      const body = bodies[next++]!;
      const t0 = performance.now();
      const res = await fetch(`${t.url}/v1/embeddings`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body,
        signal: AbortSignal.timeout(300_000),
      });
      await res.arrayBuffer();
      latencies.push(performance.now() - t0);
      if (res.status !== 200) failed++;
      const header = res.headers.get('x-cache-hits');
      if (header !== null) hits = (hits ?? 0) + Number(header);
    }
  };
  await Promise.all(Array.from({ length: REINDEX.concurrency }, client));
  return { seconds: (performance.now() - started) / 1000, latencies, hits, failed };
}

/**
 * The re-index workload on every target, the order rotating with each repeat as for the other
 * workloads; each repeat sends inputs no server has seen. A server without a cache does the same
 * work in every pass; one with a cache does none in the warm pass and half in the half-new pass.
 */
async function runReindex(
  live: Array<{ spec: TargetSpec; target: RunningTarget; result: HttpTargetResult; headers: Record<string, string> }>,
  opts: HttpOptions,
): Promise<void> {
  const runTag = randomBytes(3).toString('hex');
  const passes = reindexPasses(`${runTag}-0`).map((p) => p.name);
  const runs = new Map(
    live.map((l) => [l, new Map<string, Array<Awaited<ReturnType<typeof reindexPass>>>>(passes.map((p) => [p, []]))]),
  );
  for (let r = 0; r < opts.repeats; r++) {
    const order = live.map((_, i) => live[(i + r) % live.length]!);
    for (const l of order) {
      for (const pass of reindexPasses(`${runTag}-${r}`)) {
        const measured = await reindexPass(l.target, l.headers, l.spec.models.embed, pass.inputs);
        runs.get(l)!.get(pass.name)!.push(measured);
        log(
          `  ${l.spec.name.padEnd(12)} ${pass.name.padEnd(16)} repeat ${r + 1}: ${round(pass.inputs.length / measured.seconds, 1)} inputs/s` +
            `${measured.hits === undefined ? '' : `, ${measured.hits} cache hits`}${measured.failed ? ` (${measured.failed} failed requests)` : ''}`,
        );
      }
    }
  }
  for (const l of live) {
    for (const [name, results] of runs.get(l)!) {
      const rps = results.map((x) => (x.latencies.length - x.failed) / x.seconds);
      const hits = results.flatMap((x) => (x.hits === undefined ? [] : [x.hits]));
      const quantile = (q: number) =>
        results.map(
          (x) =>
            [...x.latencies].sort((a, b) => a - b)[
              Math.min(x.latencies.length - 1, Math.floor(q * x.latencies.length))
            ]!,
        );
      l.result.points.push({
        target: l.spec.name,
        workload: name,
        unit: 'inputs',
        concurrency: REINDEX.concurrency,
        durationS: round(median(results.map((x) => x.seconds)), 2),
        requestsPerSec: roundSpread(spread(rps), 2),
        unitsPerSec: roundSpread(spread(rps.map((x) => x * REINDEX.perRequest)), 1),
        p50Ms: roundSpread(spread(quantile(0.5)), 1),
        p99Ms: roundSpread(spread(quantile(0.99)), 1),
        non2xx: results.reduce((a, x) => a + x.failed, 0),
        errors: 0,
        timeouts: 0,
        statusCodes: {},
        ...(hits.length ? { cacheHits: median(hits) } : {}),
      });
    }
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const f = parseFlags(process.argv.slice(2));
  const d = httpDefaults(f.quick === true);
  runHttp({
    ...d,
    targets: flagList(f, 'targets', d.targets),
    n: flagNumber(f, 'n', d.n),
    single: flagNumbers(f, 'concurrency', d.single),
    batch: flagNumbers(f, 'batch-concurrency', d.batch),
    rerank: flagNumbers(f, 'rerank-concurrency', d.rerank),
    durationS: flagNumber(f, 'duration', d.durationS),
    maxDurationS: flagNumber(f, 'max-duration', d.maxDurationS),
    batchInputs: flagNumber(f, 'batch-inputs', BATCH_WHILE_ONLINE.inputs),
    repeats: flagNumber(f, 'repeats', d.repeats),
    only: typeof f.workloads === 'string' ? f.workloads.split(',') : undefined,
    embedModel: flagString(f, 'embed-model', DEFAULT_EMBED_MODEL),
    rerankModel: flagString(f, 'rerank-model', DEFAULT_RERANK_MODEL),
    gatewayFromSrc: f['gateway-from-src'] === true,
    apiKey: flagString(f, 'api-key', process.env.BENCH_API_KEY ?? '') || null,
  }).then(
    (r) => process.stdout.write(JSON.stringify(r, null, 2) + '\n'),
    (e: unknown) => {
      console.error(e);
      process.exitCode = 1;
    },
  );
}
