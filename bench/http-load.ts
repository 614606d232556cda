/**
 * The load generator, in its own process (forked by bench/http.ts with an IPC channel) so it never
 * shares an event loop with the server or the orchestrator. Runs autocannon's programmatic API:
 * each request takes the next body of a shared rotation, so concurrent connections do not march
 * through the mix in lock-step.
 */
import { createRequire } from 'node:module';
import { percentile } from '../src/vectors/percentile.js';

export interface LoadJob {
  id: number;
  url: string;
  path: string;
  bodies: string[];
  connections: number;
  durationS: number;
  timeoutS: number;
  headers: Record<string, string>;
}

export interface LoadResult {
  id: number;
  durationS: number;
  /** 2xx responses */
  ok: number;
  /** Steady-state 2xx responses/s: connections / mean latency (Little's law; see steadyRate). */
  okPerSec: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  /** exact percentiles of the 2xx responses' latencies */
  latencyMs: { p50: number; p90: number; p99: number; mean: number; max: number };
  /** CPU the load generator itself used during the run, in % of one core */
  loadGenCpuPct?: number;
  error?: string;
}

interface AutocannonResult {
  duration: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  statusCodeStats?: Record<string, { count: number }>;
}
interface AutocannonRequest {
  method?: string;
  path?: string;
  body?: string;
  headers?: Record<string, string>;
}
interface Tracker {
  on(event: 'response', fn: (client: unknown, status: number, bytes: number, ms: number) => void): void;
}
type Autocannon = (opts: Record<string, unknown>, cb: (err: Error | null, res: AutocannonResult) => void) => Tracker;

const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

/**
 * Requests/s in steady state. Each connection sends its next request as soon as it has an answer (a
 * closed loop), so by Little's law rate = connections / mean latency: unlike counting completions over
 * the span from the first to the last, this holds when answers come in bursts (a server finishing its
 * concurrent requests together), where the count overstates the rate by up to (c - 1) / completions.
 * With non-2xx answers or errors (their time is not in the latencies), the count is used.
 */
function steadyRate(
  connections: number,
  latencies: number[],
  ok: number,
  first: number,
  last: number,
  res: AutocannonResult,
): number {
  if (ok > 0 && res.non2xx === 0 && res.errors === 0) {
    const meanS = latencies.reduce((a, b) => a + b, 0) / ok / 1000;
    return connections / meanS;
  }
  return ok >= 2 && last > first ? (ok - 1) / ((last - first) / 1000) : ok / Math.max(res.duration, 1e-9);
}

async function run(job: LoadJob): Promise<LoadResult> {
  let next = 0;
  const n = job.bodies.length;
  const latencies: number[] = [];
  let first = 0;
  let last = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const res = await new Promise<AutocannonResult>((resolve, reject) => {
    const tracker = autocannon(
      {
        url: job.url,
        connections: job.connections,
        duration: job.durationS,
        timeout: job.timeoutS,
        method: 'POST',
        headers: { 'content-type': 'application/json', ...job.headers },
        requests: [
          {
            method: 'POST',
            path: job.path,
            setupRequest: (req: AutocannonRequest) => ({ ...req, body: job.bodies[next++ % n] }),
          },
        ],
      },
      (err, r) => (err ? reject(err) : resolve(r)),
    );
    tracker.on('response', (_client, status, _bytes, ms) => {
      if (status < 200 || status >= 300) return;
      const t = performance.now();
      if (latencies.length === 0) first = t;
      last = t;
      latencies.push(ms);
    });
  });
  const cpu = process.cpuUsage(cpu0);
  const loadGenCpuPct = ((cpu.user + cpu.system) / 1000 / (performance.now() - t0)) * 100;
  const statusCodes: Record<string, number> = {};
  for (const [code, v] of Object.entries(res.statusCodeStats ?? {})) statusCodes[code] = Number(v.count);
  const ok = latencies.length;
  return {
    id: job.id,
    durationS: res.duration,
    ok,
    okPerSec: steadyRate(job.connections, latencies, ok, first, last, res),
    non2xx: res.non2xx,
    errors: res.errors,
    timeouts: res.timeouts,
    statusCodes,
    latencyMs: {
      p50: percentile(latencies, 50),
      p90: percentile(latencies, 90),
      p99: percentile(latencies, 99),
      mean: ok ? latencies.reduce((a, b) => a + b, 0) / ok : NaN,
      max: percentile(latencies, 100),
    },
    loadGenCpuPct,
  };
}

if (process.send) {
  process.on('message', (job: LoadJob) => {
    run(job).then(
      (r) => process.send!(r),
      (e: unknown) =>
        process.send!({
          id: job.id,
          durationS: 0,
          ok: 0,
          okPerSec: 0,
          non2xx: 0,
          errors: 0,
          timeouts: 0,
          statusCodes: {},
          latencyMs: { p50: NaN, p90: NaN, p99: NaN, mean: NaN, max: NaN },
          error: (e as Error).message,
        } satisfies LoadResult),
    );
  });
  process.on('disconnect', () => process.exit(0));
}
