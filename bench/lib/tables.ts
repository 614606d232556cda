/**
 * Markdown tables of bench results, for the docs: each table is made from one file in bench/results
 * and sits between markers that name the file and the table's kind,
 *
 *   <!-- bench-table:2026-11-24T12-50-37Z.json:http:embed-1-float -->
 *   ...
 *   <!-- bench-table:end -->
 *
 * and is followed, inside the markers, by a line naming the file, when and where it was measured and
 * the command that made it. `npm run docs` rewrites them (fillBenchTables); a test fails when a page
 * and its files disagree, so no figure in the docs outlives the result it came from.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CeilingPoint } from '../ceiling.js';
import type { HttpPoint, HttpTargetResult } from '../http.js';
import type { ImagesReport } from '../images.js';
import type { PreprocessReport } from '../image-preprocess.js';
import type { MachineInfo } from './common.js';
import type { BenchReport } from '../run.js';

/** What bench/soak.ts writes to results/soak-latest.json (the parts the tables read). */
interface SoakReport {
  minutes: number;
  connections: number;
  attackers: number;
  errors: number;
  embeddings: Record<string, number>;
  rerank: Record<string, number>;
  reader: Record<string, number>;
  healthMs: { count: number; p50: number; p99: number; max: number };
  rssMb: { atFirstMinute: number; maxAfterFirstMinute: number; atEnd: number; slopeMbPerMinute: number };
  /** With --churn: the models' switch period, keep-alive, and the loads and unloads counted. */
  churn?: { seconds: number; keepAlive: string; loads: number; unloads: number };
  /** The C allocator's settings the server ran with (MALLOC_*, LD_PRELOAD). */
  allocator?: Record<string, string>;
}

const MARKER = /<!-- bench-table:(\S+) -->\n[\s\S]*?<!-- bench-table:end -->/g;

/** Rewrites every bench table of a markdown page from its result file. */
export function fillBenchTables(markdown: string, resultsDir = 'bench/results'): string {
  return markdown.replace(
    MARKER,
    (_, spec: string) => `<!-- bench-table:${spec} -->\n${benchTable(spec, resultsDir)}\n<!-- bench-table:end -->`,
  );
}

/** The specs (`<file>:<kind>[:<argument>]`) of the bench tables in a page, in order. */
export function benchTableSpecs(markdown: string): string[] {
  return [...markdown.matchAll(MARKER)].map((m) => m[1]!);
}

/** One table and its source line, from `<file>:<kind>[:<argument>]`. */
export function benchTable(spec: string, resultsDir = 'bench/results'): string {
  const [file, kind, argument] = spec.split(':') as [string, string | undefined, string | undefined];
  const data: unknown = JSON.parse(readFileSync(join(resultsDir, file), 'utf8'));
  const table = (() => {
    switch (kind) {
      case 'http':
        return httpTable(data as BenchReport, need(argument, spec));
      case 'cpu':
        return cpuTable(data as BenchReport, need(argument, spec));
      case 'phases':
        return phasesTable(data as BenchReport, need(argument, spec));
      case 'reindex':
        return reindexTable(data as BenchReport);
      case 'batch-while-online':
        return batchWhileOnlineTable(data as BenchReport);
      case 'ceiling':
        return ceilingTable(data as BenchReport);
      case 'ceiling-best':
        return ceilingBestTable(data as BenchReport);
      case 'soak':
        return soakTable(data as SoakReport);
      case 'images':
        return imagesTable(data as ImagesReport);
      case 'images-isolation':
        return imagesIsolationTable(data as ImagesReport);
      case 'image-preprocess':
        return imagePreprocessTable(data as PreprocessReport);
      default:
        throw new Error(`bench-table ${spec}: no table kind "${kind}"`);
    }
  })();
  return `${table}\n\n${sourceLine(file, data)}`;
}

function need(argument: string | undefined, spec: string): string {
  if (!argument) throw new Error(`bench-table ${spec}: name the workload (<file>:<kind>:<workload>)`);
  return argument;
}

function markdownTable(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

const num = (x: number, digits = 1) => x.toFixed(digits);
const thousands = (x: number) => x.toLocaleString('en-US');
const ms = (x: number) => (x < 100 ? `${num(x)} ms` : `${thousands(Math.round(x))} ms`);

/** A target's precision (files before 2026-11-24 did not record it: their int8 targets are named so). */
function variant(report: BenchReport, name: string): string {
  return report.http?.find((t) => t.name === name)?.variant ?? (name.includes('int8') ? 'int8' : 'fp32');
}

function points(report: BenchReport, workload: string): Array<{ target: HttpTargetResult; points: HttpPoint[] }> {
  const out = (report.http ?? [])
    .map((target) => ({ target, points: target.points.filter((p) => p.workload === workload) }))
    .filter((t) => t.points.length > 0);
  if (out.length === 0) throw new Error(`no http points of workload ${workload}`);
  return out;
}

const concurrencies = (ts: Array<{ points: HttpPoint[] }>) =>
  [...new Set(ts.flatMap((t) => t.points.map((p) => p.concurrency)))].sort((a, b) => a - b);

/**
 * Units per second of every target at every concurrency (median of the repeats; p50 at concurrency
 * 1, where it is one request's latency), and for each server the ratio to the best raw ONNX Runtime
 * layout measured beside it at that point (at concurrency 1: how many ms its p50 is above raw's).
 */
function httpTable(report: BenchReport, workload: string): string {
  const targets = points(report, workload);
  const unit = targets[0]!.points[0]!.unit;
  const ratios = report.ratios;
  const servers = targets.filter(
    ({ target }) =>
      target.kind === 'gateway' &&
      [...ratios.vsSideBySide, ...ratios.c1LatencyVsSideBySide].some(
        (r) => r.target === target.name && r.workload === workload,
      ),
  );
  const header = [
    'concurrency',
    ...targets.map((t) => t.target.name),
    ...servers.map((t) => `${t.target.name} / best raw beside`),
  ];
  const rows = concurrencies(targets).map((c) => [
    String(c),
    ...targets.map(({ points: ps }) => {
      const p = ps.find((q) => q.concurrency === c);
      if (!p) return '';
      return c === 1 ? `${num(p.unitsPerSec.median)} (p50 ${ms(p.p50Ms.median)})` : num(p.unitsPerSec.median);
    }),
    ...servers.map(({ target }) => {
      if (c === 1) {
        const over = ratios.c1LatencyVsSideBySide.find((r) => r.target === target.name && r.workload === workload);
        if (over) return `p50 ${over.overMs >= 0 ? '+' : ''}${num(over.overMs)} ms`;
      }
      const ratio = ratios.vsSideBySide.find(
        (r) =>
          r.target === target.name &&
          r.workload === workload &&
          r.concurrency === c &&
          variant(report, r.raw) === variant(report, target.name),
      );
      return ratio ? `x${num(ratio.ratio, 2)}` : '';
    }),
  ]);
  return `${unit}/s\n\n${markdownTable(header, rows)}`;
}

/**
 * The bench's CPU account of each target at each point: where the CPU went in % of one core (the
 * target's main thread, its other threads, the load generator) and, in files that have them, the
 * main thread's CPU per request and units per second of CPU of the threads that run the model.
 */
function cpuTable(report: BenchReport, workload: string): string {
  const targets = points(report, workload).filter((t) => t.points.some((p) => p.cpuPct));
  if (targets.length === 0) throw new Error(`no CPU account for workload ${workload}`);
  const unit = targets[0]!.points[0]!.unit;
  const perRequest = targets.some((t) => t.points.some((p) => p.cpuPerRequestMs));
  const header = [
    'target',
    'concurrency',
    'main thread, % of a core',
    'other threads, %',
    'load generator, %',
    ...(perRequest ? ['main thread, ms CPU per request', `${unit} per CPU-second of the model's threads`] : []),
  ];
  const rows = targets.flatMap(({ target, points: ps }) =>
    ps.map((p) => [
      target.name,
      String(p.concurrency),
      ...(p.cpuPct ? [p.cpuPct.main, p.cpuPct.other, p.cpuPct.loadGen].map((x) => num(x, 0)) : ['', '', '']),
      ...(perRequest
        ? [
            p.cpuPerRequestMs ? num(p.cpuPerRequestMs.main, 2) : '',
            p.unitsPerWorkerCoreSecond === undefined ? '' : num(p.unitsPerWorkerCoreSecond),
          ]
        : []),
    ]),
  );
  return markdownTable(header, rows);
}

/** The re-indexing passes: inputs/s (median [min-max]) per target, and the inputs the cache answered. */
function reindexTable(report: BenchReport): string {
  const passes = ['reindex-cold', 'reindex-warm', 'reindex-half-new'];
  const targets = (report.http ?? []).filter((t) => t.points.some((p) => passes.includes(p.workload)));
  if (targets.length === 0) throw new Error('no reindex points');
  const caching = targets.filter((t) => t.points.some((p) => p.cacheHits !== undefined));
  const header = [
    'pass',
    ...targets.map((t) => `${t.name}: inputs/s`),
    ...caching.map((t) => `${t.name}: inputs its cache answered`),
  ];
  const rows = passes.map((pass) => {
    const at = (ts: HttpTargetResult[]) => ts.map((t) => t.points.find((p) => p.workload === pass));
    return [
      pass.replace('reindex-', ''),
      ...at(targets).map((p) =>
        p ? `${num(p.unitsPerSec.median)} [${num(p.unitsPerSec.min)}-${num(p.unitsPerSec.max)}]` : '',
      ),
      ...at(caching).map((p) => (p?.cacheHits === undefined ? '' : thousands(p.cacheHits))),
    ];
  });
  return markdownTable(header, rows);
}

/**
 * Each gateway's batch-while-online figures (median of the repeats [range]): online c=1 p50 idle and
 * during a batch and their ratio; the batch alone and the same inputs over HTTP at c=32, and theirs.
 */
function batchWhileOnlineTable(report: BenchReport): string {
  const targets = (report.http ?? []).filter((t) => t.batchWhileOnline);
  if (targets.length === 0) throw new Error('no batch-while-online results');
  const spread = (s: { median: number; min: number; max: number }, format: (x: number) => string) =>
    s.min === s.max ? format(s.median) : `${format(s.median)} [${format(s.min)}-${format(s.max)}]`;
  const at = (t: HttpTargetResult, workload: string) => t.points.find((p) => p.workload === workload);
  const rows = targets.map((t) => {
    const summary = t.batchWhileOnline!;
    const p50 = (workload: string) => {
      const p = at(t, workload);
      return p ? spread(p.p50Ms, ms) : '';
    };
    const rate = (workload: string) => {
      const p = at(t, workload);
      return p ? spread(p.unitsPerSec, (x) => num(x)) : '';
    };
    const ratio = (median: number, s: typeof summary.latencyRatios | undefined) =>
      s ? spread(s, (x) => `${num(x, 2)}x`) : `${num(median, 2)}x`;
    return [
      `${t.name} (${thousands(summary.batchInputs ?? 0)} inputs, ${summary.repeats ?? 1} repeats)`,
      p50('online-c1-idle'),
      p50('online-c1-during-batch'),
      ratio(summary.latencyRatio, summary.latencyRatios),
      rate('http-c32-same-inputs'),
      rate('batch-alone'),
      ratio(summary.throughputRatio, summary.throughputRatios),
      rate('batch-during-online'),
    ];
  });
  return markdownTable(
    [
      'target',
      'online p50, idle',
      'online p50, during a batch',
      'during / idle (target <= 1.5)',
      'HTTP c=32, inputs/s',
      'batch alone, inputs/s',
      'batch / HTTP (target >= 0.95)',
      'batch beside the online requests, inputs/s',
    ],
    rows,
  );
}

const spinning = { '1': ', spinning', '0': ', not spinning' } as const;
const sweepLayout = (p: CeilingPoint) =>
  `${p.sessions} x ${p.threads}${p.arena ? '' : ', arena off'}${p.spinning === null ? '' : spinning[p.spinning]}`;

/** The fp32 embeddings sweep of raw ONNX Runtime: inputs/s by layout (sessions x intra-op threads) and batch size. */
function ceilingTable(report: BenchReport): string {
  const ceiling = report.ceiling;
  if (!ceiling) throw new Error('no ceiling sweep in this file');
  const batches = [...new Set(ceiling.embed.map((p) => p.batch))].sort((a, b) => a - b);
  const layouts = [...new Set(ceiling.embed.map(sweepLayout))];
  const rows = layouts.map((layout) => [
    layout,
    ...batches.map((b) => {
      const p = ceiling.embed.find((q) => sweepLayout(q) === layout && q.batch === b);
      return p ? num(p.inputsPerSec.median) : '';
    }),
  ]);
  return `inputs/s, ${ceiling.embedModel}\n\n${markdownTable(['sessions x intra-op threads', ...batches.map((b) => `batch ${b}`)], rows)}`;
}

/** The sweep's best layout for each workload and precision, and the fp32 MatMul rate ORT reached on the machine. */
function ceilingBestTable(report: BenchReport): string {
  const ceiling = report.ceiling;
  if (!ceiling) throw new Error('no ceiling sweep in this file');
  const best = (ps: CeilingPoint[]) =>
    ps.reduce<CeilingPoint | null>((a, p) => (!a || p.inputsPerSec.median > a.inputsPerSec.median ? p : a), null);
  const row = (what: string, p: CeilingPoint | null, unit: string) =>
    p
      ? [what, `${sweepLayout(p)}, batch ${p.batch}`, `${num(p.inputsPerSec.median)} ${unit}/s`, num(p.gflops.median)]
      : [what, 'not run', '', ''];
  const rows = [
    row(`embeddings fp32 (${ceiling.embedModel})`, ceiling.bestEmbed, 'inputs'),
    row(`rerank fp32 (${ceiling.rerankModel})`, ceiling.bestRerank, 'pairs'),
    ...(ceiling.int8
      ? [
          row(`embeddings int8 (${ceiling.int8.embedModel})`, best(ceiling.int8.embed), 'inputs'),
          row(`rerank int8 (${ceiling.int8.rerankModel})`, best(ceiling.int8.rerank), 'pairs'),
        ]
      : []),
    ['fp32 MatMul peak (a MatMul graph in ORT)', '', '', num(ceiling.matmulPeakGflops)],
  ];
  return markdownTable(['workload', 'best layout', 'rate', 'GFLOP/s'], rows);
}

function soakTable(soak: SoakReport): string {
  const count = (answers: Record<string, number>) =>
    Object.entries(answers)
      .map(([status, n]) => `${thousands(n)} x ${status}`)
      .join(', ');
  const rows = [
    ['embeddings answers', count(soak.embeddings)],
    ['rerank answers', count(soak.rerank)],
    ['errors (non-2xx or failed requests, failed /health)', thousands(soak.errors)],
    ['web reader answers to the attackers', count(soak.reader)],
    [
      `/health over ${thousands(soak.healthMs.count)} probes: p50 / p99 / max`,
      `${num(soak.healthMs.p50)} / ${num(soak.healthMs.p99)} / ${num(soak.healthMs.max, 0)} ms`,
    ],
    [
      'resident memory at the first minute / highest after it / at the end',
      `${[soak.rssMb.atFirstMinute, soak.rssMb.maxAfterFirstMinute, soak.rssMb.atEnd].map(thousands).join(' / ')} MB`,
    ],
    ['resident memory slope after the first minute', `${num(soak.rssMb.slopeMbPerMinute)} MB per minute`],
  ];
  const { churn } = soak;
  if (churn)
    rows.push([
      `model loads / unloads (the clients switch models every ${churn.seconds} s, keep-alive ${churn.keepAlive})`,
      `${thousands(churn.loads)} / ${thousands(churn.unloads)}`,
    ]);
  return markdownTable(
    [
      'measure',
      `${soak.minutes} minutes, ${soak.connections} clients, ${soak.attackers} attackers${churn ? ', models churning' : ''}`,
    ],
    rows,
  );
}

function imagesTable(report: ImagesReport): string {
  const rows = report.cases.map((c) => [
    `\`${c.pipeline}\``,
    c.size,
    c.input,
    num(c.seconds, 2),
    num(c.secondsPerOutputMegapixel, 2),
    `${thousands(Math.round(c.decodeMs))} / ${thousands(Math.round(c.inferenceMs))} / ${thousands(Math.round(c.encodeMs))}`,
    `${thousands(c.idleRssMB)} -> ${thousands(c.peakRssMB)}`,
  ]);
  const header = [
    'pipeline',
    'output',
    'input',
    'seconds',
    's per output megapixel',
    'decode / inference / encode, ms',
    'resident MB, idle -> peak',
  ];
  return markdownTable(header, rows);
}

function imagesIsolationTable(report: ImagesReport): string {
  const iso = report.isolation;
  if (!iso) throw new Error('no isolation measurement in this file');
  const row = (what: string, r: { n: number; p50Ms: number; p99Ms: number }) => [
    what,
    thousands(r.n),
    num(r.p50Ms),
    num(r.p99Ms),
  ];
  const caption =
    `1-input embeddings requests beside a ${iso.size} \`${iso.pipeline}\` edit (${num(iso.editSeconds, 1)} s; ` +
    `${iso.textWorkers} text workers, ${iso.imageThreads} image thread)`;
  const table = markdownTable(
    ['embeddings requests', 'requests', 'p50 ms', 'p99 ms'],
    [row('server idle', iso.idle), row('during the edit', iso.duringEdit)],
  );
  return `${caption}\n\n${table}`;
}

const PREPROCESS_WORKLOADS: Record<string, string> = {
  'small-png': '224x224 PNG',
  'photo-jpeg': '1920x1080 JPEG q90',
};

function imagePreprocessTable(report: PreprocessReport): string {
  const rows = report.cases.map((c) => [
    PREPROCESS_WORKLOADS[c.workload] ?? c.workload,
    c.processor === 'clip' ? 'CLIP' : c.processor === 'siglip' ? 'SigLIP' : c.processor,
    num(c.oursMs, 2),
    num(c.pillowMs, 2),
    `${num(c.ratio, 2)}x`,
  ]);
  return markdownTable(
    ['workload', 'processor', 'ours (CPU ms)', `Pillow ${report.pillow} (CPU ms)`, 'ours / Pillow'],
    rows,
  );
}

/** The Server-Timing phases in the order a request goes through them. */
const PHASE_ORDER = ['parse', 'base64', 'header', 'tokenize', 'queue', 'preprocess', 'inference'];

/**
 * Where a gateway's requests spent their time at each point of a workload (the mean ms per request
 * of each Server-Timing phase, from its /metrics), beside its main thread's and workers' CPU per
 * request: for image workloads, which part of the server's path is the gap to raw ORT.
 */
function phasesTable(report: BenchReport, workload: string): string {
  const rows = points(report, workload).flatMap(({ target, points: ps }) =>
    ps.filter((p) => p.phasesMs).map((p) => ({ target, p })),
  );
  if (rows.length === 0) throw new Error(`no phase split of workload ${workload}`);
  const phases = PHASE_ORDER.filter((phase) => rows.some(({ p }) => p.phasesMs![phase] !== undefined));
  return markdownTable(
    ['target', 'c', ...phases.map((phase) => `${phase} (ms)`), 'CPU per request: main / workers (ms)'],
    rows.map(({ target, p }) => [
      target.name,
      String(p.concurrency),
      ...phases.map((phase) => (p.phasesMs![phase] === undefined ? '' : num(p.phasesMs![phase]))),
      p.cpuPerRequestMs ? `${num(p.cpuPerRequestMs.main)} / ${num(p.cpuPerRequestMs.other)}` : '',
    ]),
  );
}

/** "From <file> (<date>, <machine>): `<command>`." */
function sourceLine(file: string, data: unknown): string {
  const link = `[bench/results/${file}](../bench/results/${file})`;
  const report = data as Partial<BenchReport> & Partial<ImagesReport> & Partial<SoakReport>;
  let command: string;
  // The allocator's settings a run had in its environment are part of how to make it again.
  const allocator = Object.entries(report.allocator ?? {})
    .map(([name, value]) => `${name}=${value} `)
    .join('');
  if (Array.isArray(report.argv)) {
    const argv = report.argv.map((a, i, all) => (all[i - 1] === '--api-key' ? 'KEY' : a));
    // An image run's model comes from the environment's models dir (ONNX_GATEWAY_MODELS_DIR): named.
    const dir = report.models?.image ? report.models.dir : undefined;
    const env = dir && dir !== '.data/models' ? `ONNX_GATEWAY_MODELS_DIR=${dir} ` : '';
    command = [`${allocator}${env}npx tsx bench/run.ts`, ...argv].join(' ');
  } else if (typeof (data as { command?: unknown }).command === 'string') {
    command = `${allocator}${(data as { command: string }).command}`;
  } else if (report.kind === 'images') {
    command = 'npx tsx bench/images.ts';
  } else if (report.minutes !== undefined) {
    const churn = report.churn
      ? ` --churn ${report.churn.seconds}${report.churn.keepAlive === '5s' ? '' : ` --keep-alive ${report.churn.keepAlive}`}`
      : '';
    command =
      `npm run build && ${allocator}npx tsx bench/soak.ts ` +
      `--minutes ${report.minutes} --connections ${report.connections} --attackers ${report.attackers}${churn}`;
  } else {
    throw new Error(`${file}: neither a bench/run.ts, bench/images.ts nor bench/soak.ts result`);
  }
  const started = report.startedAt ?? (data as { when?: string }).when;
  const when = started ? `${started.slice(0, 16).replace('T', ' ')} UTC, ` : '';
  // Targets run by another node binary than the bench's own (bench/http.ts, gateway@NODE).
  const onOtherNodes = (report.http ?? []).filter((t) => t.node).map((t) => `${t.name}: ${t.node}`);
  const on = report.machine ? machine(report.machine, onOtherNodes) : 'the machine is not recorded';
  return `From ${link} (${when}${on}), made by \`${command}\`.`;
}

function machine(m: MachineInfo, otherNodes: string[] = []): string {
  const simd =
    [
      ['avx512f', 'AVX-512'],
      ['avx2', 'AVX2'],
      ['neon', 'NEON'],
    ].find(([flag]) => m.cpuFlags.includes(flag!))?.[1] ?? 'no AVX2';
  return (
    `${m.cores} cores ${m.cpuModel} (${simd}), load ${m.loadavg[0]}, Node ${m.node.replace(/^v/, '')}` +
    (otherNodes.length > 0 ? ` (${otherNodes.join(', ')})` : '') +
    ', ' +
    `onnxruntime-node ${m.onnxruntimeNode}`
  );
}
