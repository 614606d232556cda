/**
 * Shared helpers of the bench suite: paths, flags, statistics, machine facts, small worker/child
 * launchers that work both under tsx (bench sources are TypeScript) and on compiled JavaScript.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { cpus, totalmem, loadavg, platform, release } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker, type WorkerOptions } from 'node:worker_threads';
import { spawn, type ChildProcess } from 'node:child_process';

export const BENCH_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const REPO_ROOT = resolve(BENCH_DIR, '..');
export const RESULTS_DIR = join(BENCH_DIR, 'results');
export const SHARED_DIR = resolve(REPO_ROOT, '..', 'shared');

export const DEFAULT_EMBED_MODEL = 'synthetic-all-MiniLM-L6-v2';
export const DEFAULT_RERANK_MODEL = 'synthetic-ms-marco-MiniLM-L-6-v2';

/** Models dir: env ONNX_GATEWAY_MODELS_DIR (relative paths are taken from the repo root), default `.data/models`. */
export function modelsDir(): string {
  const dir = process.env.ONNX_GATEWAY_MODELS_DIR ?? '.data/models';
  return isAbsolute(dir) ? dir : resolve(REPO_ROOT, dir);
}

/** "id" or "id:int8" (the int8 variant, as the server names it) -> the model's folder. */
export function modelDir(id: string): string {
  return join(modelsDir(), id.replace(/:int8$/, ''));
}

export function isInt8(id: string): boolean {
  return id.endsWith(':int8');
}

/** The ONNX file of "id" (fp32) or "id:int8" (what `onnx-gateway models quantize` writes, or the Hub's name). */
export function modelOnnxPath(id: string): string {
  const dir = modelDir(id);
  const candidates = isInt8(id)
    ? [join(dir, 'onnx', 'model_int8.onnx'), join(dir, 'onnx', 'model_quantized.onnx')]
    : [join(dir, 'onnx', 'model.onnx'), join(dir, 'model.onnx')];
  const found = candidates.find((p) => existsSync(p));
  if (!found) {
    const hint = isInt8(id)
      ? ` (make it with \`node dist/cli/index.js models quantize ${id.replace(/:int8$/, '')}\`)`
      : '';
    throw new Error(`no ONNX file for model ${id}: looked at ${candidates.join(', ')}${hint}`);
  }
  return found;
}

export function hasOnnx(id: string): boolean {
  try {
    modelOnnxPath(id);
    return true;
  } catch {
    return false;
  }
}

export function readJson<T = unknown>(path: string): T {
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}

export function readJsonl<T = unknown>(path: string): T[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as T);
}

// ---------------------------------------------------------------------------------------------
// Flags: --name value, --name=value, --flag (boolean). Unknown flags are kept; callers pick.

export type Flags = Record<string, string | boolean>;

export function parseFlags(argv: string[]): Flags {
  const out: Flags = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (!a.startsWith('--')) continue;
    const eq = a.indexOf('=');
    if (eq > 0) {
      out[a.slice(2, eq)] = a.slice(eq + 1);
      continue;
    }
    const next = argv[i + 1];
    if (next !== undefined && !next.startsWith('--')) {
      out[a.slice(2)] = next;
      i++;
    } else out[a.slice(2)] = true;
  }
  return out;
}

export function flagString(f: Flags, name: string, fallback: string): string {
  const v = f[name];
  return typeof v === 'string' ? v : fallback;
}

export function flagNumber(f: Flags, name: string, fallback: number): number {
  const v = f[name];
  if (typeof v !== 'string') return fallback;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new Error(`--${name} expects a number, got ${v}`);
  return n;
}

export function flagList(f: Flags, name: string, fallback: string[]): string[] {
  const v = f[name];
  return typeof v === 'string'
    ? v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : fallback;
}

export function flagNumbers(f: Flags, name: string, fallback: number[]): number[] {
  return flagList(f, name, fallback.map(String)).map(Number);
}

// ---------------------------------------------------------------------------------------------
// Statistics

export interface Spread {
  min: number;
  median: number;
  max: number;
  n: number;
}

export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export { percentile } from '../../src/vectors/percentile.js';

export function spread(xs: readonly number[]): Spread {
  if (xs.length === 0) return { min: NaN, median: NaN, max: NaN, n: 0 };
  return { min: Math.min(...xs), median: median(xs), max: Math.max(...xs), n: xs.length };
}

export function round(x: number, digits = 3): number {
  if (!Number.isFinite(x)) return x;
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

export function roundSpread(s: Spread, digits = 2): Spread {
  return { min: round(s.min, digits), median: round(s.median, digits), max: round(s.max, digits), n: s.n };
}

/** "62.1 [58.0-64.3]" : median with the min-max range of the repeats. */
export function fmtSpread(s: Spread | undefined, digits = 1): string {
  if (!s || !Number.isFinite(s.median)) return '-';
  if (s.n <= 1 || s.min === s.max) return s.median.toFixed(digits);
  return `${s.median.toFixed(digits)} [${s.min.toFixed(digits)}-${s.max.toFixed(digits)}]`;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export function nowMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

// ---------------------------------------------------------------------------------------------
// Machine facts

export interface MachineInfo {
  cores: number;
  cpuModel: string;
  cpuFlags: string[];
  memTotalMB: number;
  loadavg: number[];
  platform: string;
  kernel: string;
  node: string;
  onnxruntimeNode: string;
  transformersJs: string;
  tokenizersJs: string;
}

function pkgVersion(name: string): string {
  try {
    return readJson<{ version: string }>(join(REPO_ROOT, 'node_modules', name, 'package.json')).version;
  } catch {
    return 'unknown';
  }
}

export function machineInfo(): MachineInfo {
  let cpuModel = cpus()[0]?.model ?? 'unknown';
  let cpuFlags: string[] = [];
  try {
    const info = readFileSync('/proc/cpuinfo', 'utf8');
    const model = /^model name\s*:\s*(.+)$/m.exec(info);
    if (model) cpuModel = model[1]!.trim();
    const flags = /^flags\s*:\s*(.+)$/m.exec(info);
    if (flags) {
      const interesting = /^(avx|avx2|fma|f16c|avx512\w*|amx\w*|sse4_2|vnni\w*)$/;
      cpuFlags = flags[1]!.split(/\s+/).filter((f) => interesting.test(f));
    }
  } catch {
    /* not linux */
  }
  return {
    cores: cpus().length,
    cpuModel,
    cpuFlags,
    memTotalMB: Math.round(totalmem() / 2 ** 20),
    loadavg: loadavg().map((x) => round(x, 2)),
    platform: platform(),
    kernel: release(),
    node: process.version,
    onnxruntimeNode: pkgVersion('onnxruntime-node'),
    transformersJs: pkgVersion('@huggingface/transformers'),
    tokenizersJs: pkgVersion('@huggingface/tokenizers'),
  };
}

/** What the environment tells the C allocator (glibc's MALLOC_* settings, a preloaded allocator): memory figures depend on it. */
export function allocatorEnvironment(): Record<string, string> {
  return Object.fromEntries(
    Object.entries(process.env).filter(
      (entry): entry is [string, string] =>
        (entry[0].startsWith('MALLOC_') || entry[0] === 'LD_PRELOAD' || entry[0] === 'GLIBC_TUNABLES') &&
        entry[1] !== undefined,
    ),
  );
}

// ---------------------------------------------------------------------------------------------
// Running bench modules written in TypeScript inside workers and child processes.

function isTs(url: URL): boolean {
  return url.pathname.endsWith('.ts');
}

/**
 * A worker thread on a bench module. Under tsx the loader does not reach worker threads, so a `.ts`
 * module is started through a small eval bootstrap that registers tsx inside the worker first.
 */
export function startWorker(url: URL, options: WorkerOptions = {}): Worker {
  if (!isTs(url)) return new Worker(url, options);
  const tsxApi = import.meta.resolve('tsx/esm/api');
  const code = `import(${JSON.stringify(tsxApi)}).then((m) => { m.register(); return import(${JSON.stringify(url.href)}); })`;
  return new Worker(code, { ...options, eval: true });
}

/** A child Node process on a bench module (`node --import tsx file.ts` for TypeScript). */
export function spawnNode(
  url: URL,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; ipc?: boolean; cwd?: string } = {},
): ChildProcess {
  const file = fileURLToPath(url);
  const nodeArgs = isTs(url) ? ['--import', import.meta.resolve('tsx'), file, ...args] : [file, ...args];
  return spawn(process.execPath, nodeArgs, {
    cwd: options.cwd ?? REPO_ROOT,
    env: options.env ?? process.env,
    stdio: options.ipc ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe'],
  });
}

export function fileUrl(path: string): URL {
  return pathToFileURL(path);
}

export function log(...parts: unknown[]): void {
  process.stderr.write(parts.map(String).join(' ') + '\n');
}

/**
 * CPU time a process has used so far, its main thread apart from its other threads, in ms
 * (Linux /proc; null elsewhere or when the process is gone).
 */
export function processCpuMs(pid: number): { main: number; other: number } | null {
  try {
    let main = 0;
    let other = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      // Fields after the command name (which may contain spaces): utime and stime are the 12th and 13th.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ms = (Number(fields[11]) + Number(fields[12])) * 10; // USER_HZ is 100
      if (Number(tid) === pid) main += ms;
      else other += ms;
    }
    return { main, other };
  } catch {
    return null;
  }
}
