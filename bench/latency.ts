/**
 * One request at a time: where a concurrency-1 request's time goes, against raw ONNX Runtime
 * running the same inputs alone, measured in alternating passes on the same cores.
 *
 *   npm run build && npx tsx bench/latency.ts [--requests 300] [--rerank-requests 40] [--rounds 3]
 *       [--workloads embed-1-float,rerank-1x50] [--targets gateway,LABEL=gateway@NODE --flag ...]
 *       [--cpu-prof] [--out results/latency-latest.json]
 *
 * Per workload and round: raw ORT (embed-1-float: each input alone on one session of every core,
 * spinning, as the HTTP bench's concurrency-1 reference; rerank-1x50: the request's 50 pairs one at a
 * time on one session per core, and on one session of every core, each in request order and longest
 * first, the fastest taken), then the gateway
 * (`dist/`, started as the HTTP bench starts it: cache off, one window per pair), sent one request at
 * a time over one keep-alive connection from this process; the order of the two alternates with
 * each round. For the gateway it reports:
 *   wall:  the client's p50/p99 and their excess over raw's (the p50's also less the client's own
 *          CPU per request, which raw's loop does not spend), the mean of each Server-Timing phase (tokenize, queue,
 *          inference); `outside` is the rest of the mean: HTTP in and out, validation, the hop to the
 *          worker and back, packing and pooling, serialising, the client's own share (for a request
 *          of one batch: a rerank request's inference is summed over batches that run side by side);
 *   CPU per request: the gateway's main thread, its other threads (the worker, ONNX Runtime's
 *          threads), and this process as the load generator (Linux /proc, process.cpuUsage);
 *          `offCpu` is the rest of the mean wall: less the main thread's and the client's CPU and the
 *          inference (which do not overlap at concurrency 1): the thread hops' wake-ups and the
 *          worker's own work around the run (the other threads' CPU is not subtracted: most of it
 *          is the run's, on as many threads as the session has);
 *   --cpu-prof: the gateway also runs under node's CPU profiler, and its main thread's samples taken
 *          while requests were measured are
 *          split by stage (HTTP parse and write, fastify, validation, tokenising, scheduling, the
 *          hop to the worker, serialising, the socket's writes, GC), in ms per request; the worker
 *          thread's profile the same way (its message handling, tensor packing, the ORT run, pooling).
 * Values are the median of the rounds, with min and max.
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest, Agent } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  DEFAULT_EMBED_MODEL,
  DEFAULT_RERANK_MODEL,
  RESULTS_DIR,
  type Spread,
  flagList,
  flagNumber,
  flagString,
  log,
  machineInfo,
  modelOnnxPath,
  parseFlags,
  percentile,
  processCpuMs,
  round,
  roundSpread,
  spread,
} from './lib/common.js';
import { SessionGroup, packBatches, sessionOptions } from './ceiling.js';
import { type RunningTarget, type TargetSpec, targetSpecs, workloads as httpWorkloads, type Workload } from './http.js';
import { embeddingMix, rerankMix, tokenizeMix, tokenizePairs } from './mix.js';
import { parseServerTiming } from '../src/http/timing.js';

const RERANK_REQUESTS = 8;
const WORKLOADS = ['embed-1-float', 'rerank-1x50'] as const;
type WorkloadName = (typeof WORKLOADS)[number];

interface Pass {
  p50: number;
  p99: number;
  mean: number;
}

interface GatewayPass extends Pass {
  phases: { tokenize: number; queue: number; inference: number; outside: number };
  cpuPerRequestMs: { main: number; other: number; client: number; offCpu: number };
}

// ---------------------------------------------------------------------------------------------
// Raw ONNX Runtime

/** Raw ORT in worker threads of this process: the layouts a concurrency-1 request is held to. */
class Raw {
  private constructor(
    private readonly layouts: Array<{ name: string; group: SessionGroup; orders: number }>,
    private readonly perRequest: number,
    private readonly total: number,
  ) {}

  static async open(workload: WorkloadName, cores: number, n: number): Promise<Raw> {
    const embed = workload === 'embed-1-float';
    const model = embed ? DEFAULT_EMBED_MODEL : DEFAULT_RERANK_MODEL;
    const encoded = embed ? tokenizeMix(model, embeddingMix(n)) : tokenizePairs(model, rerankMix(RERANK_REQUESTS));
    // One input per run, in request order; a rerank request's pairs also longest first (as the
    // gateway queues them), after them in the list.
    const perRequest = embed ? 1 : 50;
    const inOrder = encoded.flatMap((e) => packBatches([e], 1));
    const longestFirst = [];
    for (let at = 0; at < inOrder.length; at += perRequest)
      longestFirst.push(...inOrder.slice(at, at + perRequest).sort((a, b) => b.seq - a.seq));
    const batches = embed ? inOrder : [...inOrder, ...longestFirst];
    const shapes = embed
      ? [{ sessions: 1, threads: cores }]
      : [{ sessions: cores, threads: 1 }, ...(cores > 1 ? [{ sessions: 1, threads: cores }] : [])];
    const layouts = [];
    for (const { sessions, threads } of shapes) {
      const group = await SessionGroup.start(
        { model: modelOnnxPath(model), options: sessionOptions(threads, { arena: true, spinning: '1' }) },
        sessions,
      );
      await group.load(batches, [0, 1, 2, 3]);
      layouts.push({ name: `${sessions}x${threads}`, group, orders: embed ? 1 : 2 });
    }
    return new Raw(layouts, perRequest, inOrder.length);
  }

  /** `requests` requests back to back in each layout and order; the one with the lowest p50 is kept. */
  async measure(requests: number): Promise<Pass & { layout: string }> {
    let best: (Pass & { layout: string }) | undefined;
    for (const { name, group, orders } of this.layouts) {
      for (let order = 0; order < orders; order++) {
        const ms: number[] = [];
        for (let r = 0; r < requests; r++) {
          const offset = order * this.total + ((r * this.perRequest) % this.total);
          const { wallMs, runs } = await group.run(this.perRequest, offset);
          // One input: the run alone, as the HTTP bench's reference; a request of pairs: its wall.
          ms.push(this.perRequest === 1 ? runs[0]![1] : wallMs);
        }
        const pass = { ...summary(ms), layout: order === 0 ? name : `${name} longest first` };
        if (!best || pass.p50 < best.p50) best = pass;
      }
    }
    return best!;
  }

  async close(): Promise<void> {
    for (const { group } of this.layouts) await group.close();
  }
}

// ---------------------------------------------------------------------------------------------
// The gateway

const agent = new Agent({ keepAlive: true, maxSockets: 1 });

function post(
  url: URL,
  body: string,
  headers: Record<string, string>,
): Promise<{ status: number; timing: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: 'POST', agent, headers }, (res) => {
      res.resume();
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, timing: res.headers['server-timing'] as string | undefined }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function measureGateway(target: RunningTarget, w: Workload, requests: number): Promise<GatewayPass> {
  const url = new URL(target.url + w.path);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    ...(target.apiKey ? { authorization: `Bearer ${target.apiKey}` } : {}),
  };
  const send = async (i: number) => {
    const t0 = performance.now();
    const res = await post(url, w.bodies[i % w.bodies.length]!, headers);
    const ms = performance.now() - t0;
    if (res.status !== 200) throw new Error(`${w.path} answered ${res.status}`);
    return { ms, phases: parseServerTiming(res.timing) };
  };
  // Warm: JIT, the connection, the sessions' arenas (a rerank request is 50 runs already).
  for (let i = 0; i < (w.unitsPerRequest === 1 ? 20 : 2); i++) await send(i);
  const ms: number[] = [];
  const phases = { tokenize: 0, queue: 0, inference: 0 };
  const cpu0 = processCpuMs(target.pid!)!;
  const client0 = process.cpuUsage();
  const from = monotonicUs();
  for (let i = 0; i < requests; i++) {
    const r = await send(i);
    ms.push(r.ms);
    phases.tokenize += r.phases.tokenize ?? 0;
    phases.queue += r.phases.queue ?? 0;
    phases.inference += r.phases.inference ?? 0;
  }
  const key = `${target.name} ${w.name}`;
  windows.set(key, [...(windows.get(key) ?? []), [from, monotonicUs()]]);
  const client = process.cpuUsage(client0);
  const cpu1 = processCpuMs(target.pid!)!;
  const pass = summary(ms);
  const per = (x: number) => x / requests;
  const main = per(cpu1.main - cpu0.main);
  const other = per(cpu1.other - cpu0.other);
  const clientMs = per((client.user + client.system) / 1000);
  const inference = per(phases.inference);
  return {
    ...pass,
    phases: {
      tokenize: per(phases.tokenize),
      queue: per(phases.queue),
      inference,
      outside: pass.mean - per(phases.tokenize + phases.queue + phases.inference),
    },
    cpuPerRequestMs: {
      main,
      other,
      client: clientMs,
      offCpu: Math.max(0, pass.mean - main - clientMs - inference),
    },
  };
}

// ---------------------------------------------------------------------------------------------
// CPU profiles

/** Stages of a request's path, by the frames a sample's stack holds (first match from the leaf). */
const stages: Array<[stage: string, match: (fn: string, url: string) => boolean]> = [
  ['gc', (fn) => fn === '(garbage collector)'],
  ['idle', (fn) => fn === '(idle)'],
  ['native (libuv, polling)', (fn) => fn === '(program)'],
  ['hop: postMessage', (fn, url) => fn === 'postMessage' || url.includes('/engine/worker-pool.')],
  ['hop: message receipt', (fn, url) => url === 'node:internal/worker/io' || url.includes('per_context/messageport')],
  ['socket write', (fn) => /^(writev|writeBuffer|writeUtf8String|writeLatin1String|writeAsciiString)$/.test(fn)],
  ['ort run', (fn, url) => url.includes('onnxruntime-node') || url.includes('onnxruntime-common')],
  ['worker: pack, pool', (_fn, url) => url.includes('/worker/runner.') || url.includes('/vectors/pooling.')],
  ['tokenise', (_fn, url) => url.includes('/src/text/') || url.includes('/dist/text/') || url.includes('tokenizers')],
  [
    'serialise',
    (_fn, url) => url.includes('/vectors/encoding.') || url.includes('/http/json-text.') || url.includes('/core/'),
  ],
  ['scheduler', (_fn, url) => url.includes('/engine/')],
  ['json parse', (fn, url) => (fn === 'parse' && url === '') || url.includes('secure-json-parse')],
  ['validation', (fn, url) => url.includes('/ajv') || fn.startsWith('validate')],
  ['response schema', (_fn, url) => url.includes('fast-json-stringify')],
  ['fastify', (_fn, url) => url.includes('/fastify') || url.includes('find-my-way') || url.includes('avvio')],
  ['gateway http', (_fn, url) => url.includes('/http/')],
  ['node http, net, streams', (_fn, url) => /^node:(internal\/)?(_http|http|net|stream|streams|timers)/.test(url)],
];

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** When the gateway's requests of each workload were measured, in µs of the monotonic clock (V8's profiles' clock). */
const windows = new Map<string, Array<[number, number]>>();
const monotonicUs = (): number => Number(process.hrtime.bigint() / 1000n);

/** ms by stage in one thread's profile, of the samples taken while requests were measured. */
function splitProfile(profile: CpuProfile, during: Array<[number, number]>): Record<string, number> {
  const parent = new Map<number, number>();
  const byId = new Map<number, ProfileNode>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  const stageOf = new Map<number, string>();
  const classify = (id: number): string => {
    const known = stageOf.get(id);
    if (known) return known;
    let stage = 'other';
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const { functionName, url } = byId.get(at)!.callFrame;
      const hit = stages.find(([, match]) => match(functionName, url));
      if (hit) {
        stage = hit[0];
        break;
      }
    }
    stageOf.set(id, stage);
    return stage;
  };
  const ms: Record<string, number> = {};
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0;
    at += delta;
    if (!during.some(([from, to]) => at >= from && at <= to)) return;
    const stage = classify(id);
    ms[stage] = (ms[stage] ?? 0) + delta / 1000;
  });
  return ms;
}

/** The profiles of a run's threads: the main thread's and the text workers', the largest worker's by samples. */
function readProfiles(
  dir: string,
  during: Array<[number, number]>,
): { main?: Record<string, number>; worker?: Record<string, number> } {
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  // node names a profile CPU.<date>.<time>.<pid>.<thread id>.<seq>.cpuprofile; the main thread is 0.
  const parsed = files.map((f) => ({
    thread: Number(f.split('.').at(-3)),
    profile: JSON.parse(readFileSync(join(dir, f), 'utf8')) as CpuProfile,
  }));
  const main = parsed.find((p) => p.thread === 0);
  const busiest = parsed
    .filter((p) => p.thread !== 0)
    .map((p) => ({ ...p, busy: splitProfile(p.profile, during) }))
    .sort((a, b) => busy(b.busy) - busy(a.busy))[0];
  return { main: main && splitProfile(main.profile, during), worker: busiest?.busy };
}

const busy = (ms: Record<string, number>): number =>
  Object.entries(ms).reduce((sum, [stage, v]) => (stage === 'idle' ? sum : sum + v), 0);

// ---------------------------------------------------------------------------------------------

function summary(ms: number[]): Pass {
  return { p50: percentile(ms, 50), p99: percentile(ms, 99), mean: ms.reduce((a, b) => a + b, 0) / ms.length };
}

const rs = (values: number[]): Spread => roundSpread(spread(values), 2);

/** The gateway targets: `gateway`, or `LABEL=gateway@NODE --flag ...` (bench/http.ts), each with its own profile folder. */
function gatewayTargets(
  names: string[],
  profiling: boolean,
  n: number,
): Array<{ spec: TargetSpec; profileDir?: string }> {
  return names.map((name) => {
    const profileDir = profiling ? mkdtempSync(join(tmpdir(), 'latency-prof-')) : undefined;
    let spec = name;
    if (profileDir) {
      const flags = `--cpu-prof --cpu-prof-dir=${profileDir}`;
      spec = name.includes('gateway@') ? `${name} ${flags}` : `${name}=gateway@${process.execPath} ${flags}`;
    }
    const [target] = targetSpecs([spec], {
      embedModel: DEFAULT_EMBED_MODEL,
      rerankModel: DEFAULT_RERANK_MODEL,
      gatewayFromSrc: false,
      apiKey: null,
      n,
    });
    if (target?.kind !== 'gateway') throw new Error(`--targets: "${name}" is not a gateway target`);
    return { spec: target, profileDir };
  });
}

async function main(): Promise<void> {
  const f = parseFlags(process.argv.slice(2));
  const embedRequests = flagNumber(f, 'requests', 300);
  // A rerank request is 50 runs of the model: fewer of them take as long.
  const rerankRequests = flagNumber(f, 'rerank-requests', 40);
  const rounds = flagNumber(f, 'rounds', 3);
  const chosen = flagList(f, 'workloads', [...WORKLOADS]) as WorkloadName[];
  for (const w of chosen) if (!WORKLOADS.includes(w)) throw new Error(`--workloads: unknown "${w}"`);
  const out = flagString(f, 'out', join(RESULTS_DIR, 'latency-latest.json'));
  const machine = machineInfo();
  const n = 256;

  const specs = gatewayTargets(flagList(f, 'targets', ['gateway']), f['cpu-prof'] === true, n);
  const targets: Array<{ target: RunningTarget; profileDir?: string }> = [];
  const results: Record<string, Record<string, unknown>> = {};
  const measured = new Map<string, number>();
  try {
    for (const { spec, profileDir } of specs) {
      log(`latency: starting ${spec.name}`);
      targets.push({ target: await spec.start(), profileDir });
    }
    const wls = httpWorkloads({
      n,
      single: [1],
      batch: [],
      rerank: [1],
      embedModel: DEFAULT_EMBED_MODEL,
      rerankModel: DEFAULT_RERANK_MODEL,
    });
    for (const name of chosen) {
      const w = wls.find((x) => x.name === name)!;
      const requests = name === 'rerank-1x50' ? rerankRequests : embedRequests;
      measured.set(name, rounds * requests);
      const raw = await Raw.open(name, machine.cores, n);
      const raws: Array<Pass & { layout: string }> = [];
      const passes = new Map<string, GatewayPass[]>(targets.map(({ target }) => [target.name, []]));
      try {
        await raw.measure(name === 'rerank-1x50' ? 1 : 10);
        for (let r = 0; r < rounds; r++) {
          // Raw and each gateway in turn, the order rotating with each round.
          const order = [undefined, ...targets.map(({ target }) => target)];
          const shift = r % order.length;
          for (const target of [...order.slice(shift), ...order.slice(0, shift)]) {
            if (target) passes.get(target.name)!.push(await measureGateway(target, w, requests));
            else raws.push(await raw.measure(requests));
          }
          const q = raws.at(-1)!;
          const line = targets.map(({ target }) => {
            const g = passes.get(target.name)!.at(-1)!;
            return `${target.name} p50 ${g.p50.toFixed(2)} p99 ${g.p99.toFixed(2)} main ${g.cpuPerRequestMs.main.toFixed(2)} ms/req`;
          });
          log(
            `latency: ${name} round ${r + 1}: raw (${q.layout}) p50 ${q.p50.toFixed(2)} p99 ${q.p99.toFixed(2)} | ${line.join(' | ')}`,
          );
        }
      } finally {
        await raw.close();
      }
      results[name] = {
        requests,
        rounds,
        raw: {
          layout: raws[0]!.layout,
          p50Ms: rs(raws.map((x) => x.p50)),
          p99Ms: rs(raws.map((x) => x.p99)),
          meanMs: rs(raws.map((x) => x.mean)),
        },
      };
      for (const { target } of targets) results[name][target.name] = gatewayReport(passes.get(target.name)!, raws);
    }
  } finally {
    for (const { target } of targets) await target.stop();
  }
  let profile: Record<string, unknown> | undefined;
  if (f['cpu-prof'] === true) {
    profile = { note: 'ms per request of the main thread and the busiest worker thread, while requests were measured' };
    for (const { target, profileDir } of targets) {
      for (const name of chosen) {
        const total = measured.get(name)!;
        const { main: mainMs, worker } = readProfiles(profileDir!, windows.get(`${target.name} ${name}`) ?? []);
        profile[`${target.name} ${name}`] = { main: perRequest(mainMs, total), worker: perRequest(worker, total) };
      }
      rmSync(profileDir!, { recursive: true, force: true });
    }
  }
  const report = { when: new Date().toISOString(), machine, results, profile };
  writeFileSync(out, JSON.stringify(report, null, 2) + '\n');
  process.stdout.write(JSON.stringify({ results, profile }, null, 2) + '\n');
  log(`latency: wrote ${out}`);
  agent.destroy();
}

const perRequest = (ms: Record<string, number> | undefined, requests: number) =>
  ms &&
  Object.fromEntries(
    Object.entries(ms)
      .filter(([stage]) => stage !== 'idle')
      .sort((a, b) => b[1] - a[1])
      .map(([stage, v]) => [stage, round(v / requests, 3)]),
  );

/** A gateway's passes of one workload: medians of the rounds, with min and max. */
function gatewayReport(gateways: GatewayPass[], raws: Pass[]): Record<string, unknown> {
  const pick = (get: (g: GatewayPass) => number) => rs(gateways.map(get));
  return {
    p50Ms: pick((g) => g.p50),
    p99Ms: pick((g) => g.p99),
    meanMs: pick((g) => g.mean),
    overRawP50Ms: rs(gateways.map((g, i) => g.p50 - raws[i]!.p50)),
    overRawP99Ms: rs(gateways.map((g, i) => g.p99 - raws[i]!.p99)),
    // The load generator's own CPU per request, which raw ORT's loop does not spend, taken out.
    overRawP50LessClientMs: rs(gateways.map((g, i) => g.p50 - raws[i]!.p50 - g.cpuPerRequestMs.client)),
    // A run inside the server against the same run back to back in raw ORT, by their means: what
    // the idle time between one client's requests costs the session (cold caches, sleeping threads).
    // Read it for requests of one batch (embed-1-float): a rerank request's inference is summed
    // over batches that run side by side.
    inferenceOverRawMeanMs: rs(gateways.map((g, i) => g.phases.inference - raws[i]!.mean)),
    phasesMs: {
      tokenize: pick((g) => g.phases.tokenize),
      queue: pick((g) => g.phases.queue),
      inference: pick((g) => g.phases.inference),
      outside: pick((g) => g.phases.outside),
    },
    cpuPerRequestMs: {
      main: pick((g) => g.cpuPerRequestMs.main),
      other: pick((g) => g.cpuPerRequestMs.other),
      client: pick((g) => g.cpuPerRequestMs.client),
      offCpu: pick((g) => g.cpuPerRequestMs.offCpu),
    },
  };
}

main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
