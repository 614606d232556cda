/**
 * The bench suite.
 *
 *   npx tsx bench/run.ts [--quick] [--only ceiling,http,peers,micro] [--repeats 3] [--no-int8]
 *       [--sessions 1,2,4] [--threads 1,2,4] [--batches 1,8,32] (the ceiling sweep's layouts; default: powers of two up to the cores)
 *       [--targets gateway,gateway-int8,gateway-traced,transformers,minimal,name=URL] [--gateway-from-src] [--server gateway]
 *       [--n 256] [--embed-model ID] [--rerank-model ID] [--api-key KEY]
 *       [--workloads embed-image-224,embed-image-photo] [--image-model ID] [--image-concurrency 16] [--image-device webgpu]
 *
 * Writes bench/results/<timestamp>.json, latest.json and latest.svg, prints a compact table and the
 * ratios: server inputs/s at concurrency >= 32 over the raw-ORT ceiling, rerank pairs/s over its
 * ceiling, server against each peer at each concurrency, and concurrency-1 p50 latency against one
 * input run alone on raw ORT. When the int8 variants exist (`onnx-gateway models quantize`), the ceiling
 * also sweeps them and the int8 server runs beside the fp32 one, held to both ceilings.
 * Models dir: env ONNX_GATEWAY_MODELS_DIR (default .data/models).
 */
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import {
  DEFAULT_EMBED_MODEL,
  allocatorEnvironment,
  DEFAULT_RERANK_MODEL,
  type MachineInfo,
  RESULTS_DIR,
  fmtSpread,
  flagList,
  flagNumber,
  flagString,
  log,
  flagNumbers,
  hasOnnx,
  machineInfo,
  modelsDir,
  parseFlags,
  readJson,
  round,
  spawnNode,
} from './lib/common.js';
import { type CeilingPoint, type CeilingResult, ceilingDefaults, runCeiling } from './ceiling.js';
import { type HttpTargetResult, httpDefaults, runHttp } from './http.js';
import { BATCH_WHILE_ONLINE } from './batch-while-online.js';
import { DEFAULT_IMAGE_MODEL, isImageWorkload } from './image-workloads.js';
import { type MicroResult, runMicro } from './micro.js';
import type { PeerPoint } from './peers/inprocess.js';
import { checkXml, renderChart } from './chart.js';

const SECTIONS = ['micro', 'ceiling', 'peers', 'http'] as const;
type Section = (typeof SECTIONS)[number];

export interface Ratios {
  /** best units/s of each target at concurrency >= 32 (rerank: any concurrency) over the ceiling best (fp32, or int8 for the int8 server) */
  vsCeiling: Array<{
    target: string;
    workload: string;
    concurrency: number;
    unitsPerSec: number;
    ceilingOf: 'fp32' | 'int8';
    ceiling: number;
    ratio: number;
  }>;
  /** the server against each peer, per workload and concurrency: units/s ratio and p50 ratio */
  serverVsPeers: Array<{
    server: string;
    peer: string;
    workload: string;
    concurrency: number;
    throughputRatio: number;
    p50Ratio: number;
  }>;
  /**
   * The same, against raw ORT measured in the same rotation as the servers (targets `ort`, `ort-int8`,
   * one per layout): each eligible point over the best layout's rate at that point, measured minutes
   * from it, so machine drift cancels; `raw` names the layout that was best, `layouts` lists them all.
   */
  vsSideBySide: Array<{
    target: string;
    workload: string;
    concurrency: number;
    unitsPerSec: number;
    raw: string;
    rawUnitsPerSec: number;
    ratio: number;
    layouts: Array<{ raw: string; unitsPerSec: number }>;
  }>;
  /** concurrency-1 p50 of single-input requests over raw ORT's single-input p50 measured beside it (every core, back to back) */
  c1LatencyVsSideBySide: Array<{
    target: string;
    workload: string;
    p50Ms: number;
    raw: string;
    rawP50Ms: number;
    overMs: number;
  }>;
  /** concurrency-1 p50 of single-input requests over the raw single-input ORT latency (median over the mix) */
  c1LatencyVsRaw: Array<{
    target: string;
    workload: string;
    p50Ms: number;
    rawMs: number;
    rawThreads: number;
    ratio: number;
  }>;
  /** peers called in-process over the ceiling best */
  peersVsCeiling: Array<{ peer: string; case: string; perSec: number; ceiling: number; ratio: number }>;
  notes: string[];
}

export interface BenchReport {
  schema: 1;
  startedAt: string;
  finishedAt: string;
  durationS: number;
  argv: string[];
  quick: boolean;
  repeats: number;
  sections: Section[];
  machine: MachineInfo;
  loadavgAfter: number[];
  /** The C allocator's settings from the environment (MALLOC_*, LD_PRELOAD), which the servers inherit; absent in older files. */
  allocator?: Record<string, string>;
  /** `image`: the image-text model of the image workloads, where they ran. */
  models: { dir: string; embed: string; rerank: string; image?: string };
  ceiling: CeilingResult | null;
  /** when the ceiling was not run: the file its numbers (for ratios and chart) came from */
  ceilingFrom: string | null;
  peers: PeerPoint[] | null;
  http: HttpTargetResult[] | null;
  micro: MicroResult[] | null;
  ratios: Ratios;
  errors: Record<string, string>;
}

// ---------------------------------------------------------------------------------------------

async function runPeersChild(args: string[]): Promise<PeerPoint[]> {
  const child = spawnNode(
    new URL(`./peers/inprocess${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url),
    args,
  );
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => process.stderr.write(d));
  const code = await new Promise<number | null>((r) => child.on('exit', r));
  if (code !== 0) throw new Error(`peers in-process exited with ${code}`);
  return JSON.parse(out) as PeerPoint[];
}

function computeRatios(r: Pick<BenchReport, 'ceiling' | 'http' | 'peers'>, server: string): Ratios {
  const ratios: Ratios = {
    vsCeiling: [],
    vsSideBySide: [],
    c1LatencyVsSideBySide: [],
    serverVsPeers: [],
    c1LatencyVsRaw: [],
    peersVsCeiling: [],
    notes: [],
  };
  const raws = (r.http ?? []).filter((t) => t.kind === 'raw' && t.points.length > 0);
  const c = r.ceiling;
  const ceilingFor = (unit: string, variant: 'fp32' | 'int8' = 'fp32'): number | undefined => {
    const of = variant === 'int8' ? c?.int8 : c;
    if (unit === 'images') return undefined;
    return (unit === 'pairs' ? of?.bestRerank : of?.bestEmbed)?.inputsPerSec.median;
  };
  for (const t of (r.http ?? []).filter((x) => x.kind !== 'raw')) {
    const int8 = t.variant === 'int8';
    // The int8 server is held to its own ceiling and to the fp32 one (what int8 is for).
    const variants: Array<'fp32' | 'int8'> = int8 ? ['int8', 'fp32'] : ['fp32'];
    const single = int8 ? (c?.int8?.singleLatency ?? []) : (c?.singleLatency ?? []);
    const workloads = [...new Set(t.points.map((p) => p.workload))];
    for (const wl of workloads) {
      const pts = t.points.filter((p) => p.workload === wl);
      // Images are held to raw ORT at every point (their workloads run at 16 connections, the most a server batches).
      const eligible = pts[0]!.unit !== 'inputs' ? pts : pts.filter((p) => p.concurrency >= 32);
      const best = eligible.sort((a, b) => b.unitsPerSec.median - a.unitsPerSec.median)[0];
      for (const variant of variants) {
        const ceil = ceilingFor(pts[0]!.unit, variant);
        if (best && ceil)
          ratios.vsCeiling.push({
            target: t.name,
            workload: wl,
            concurrency: best.concurrency,
            unitsPerSec: best.unitsPerSec.median,
            ceilingOf: variant,
            ceiling: ceil,
            ratio: round(best.unitsPerSec.median / ceil, 3),
          });
      }
      // Against raw ORT beside it, the best of its layouts at each point: its own variant, and fp32 for the int8 server.
      for (const of of variants) {
        const layouts = raws.filter((x) => x.variant === of);
        for (const p of eligible) {
          const beside = layouts.flatMap((raw) =>
            raw.points.filter((x) => x.workload === wl && x.concurrency === p.concurrency).map((q) => ({ raw, q })),
          );
          const best = beside.sort((a, b) => b.q.unitsPerSec.median - a.q.unitsPerSec.median)[0];
          if (!best) continue;
          ratios.vsSideBySide.push({
            target: t.name,
            workload: wl,
            concurrency: p.concurrency,
            unitsPerSec: p.unitsPerSec.median,
            raw: best.raw.name,
            rawUnitsPerSec: best.q.unitsPerSec.median,
            ratio: round(p.unitsPerSec.median / best.q.unitsPerSec.median, 3),
            layouts: beside.map(({ raw, q }) => ({ raw: raw.name, unitsPerSec: q.unitsPerSec.median })),
          });
        }
      }
      const c1 = pts.find((p) => p.concurrency === 1);
      // At concurrency 1 the reference is the fastest single input of the target's own variant.
      const rawC1 = raws
        .filter((x) => x.variant === (int8 ? 'int8' : 'fp32'))
        .flatMap((raw) => raw.points.filter((x) => x.workload === wl && x.concurrency === 1))
        .sort((a, b) => a.p50Ms.median - b.p50Ms.median)[0];
      if (c1 && rawC1 && wl.startsWith('embed-1')) {
        ratios.c1LatencyVsSideBySide.push({
          target: t.name,
          workload: wl,
          p50Ms: c1.p50Ms.median,
          raw: rawC1.target,
          rawP50Ms: rawC1.p50Ms.median,
          overMs: round(c1.p50Ms.median - rawC1.p50Ms.median, 2),
        });
      }
      if (c1 && wl.startsWith('embed-1')) {
        for (const raw of single) {
          ratios.c1LatencyVsRaw.push({
            target: t.name,
            workload: wl,
            p50Ms: c1.p50Ms.median,
            rawMs: raw.medianMs,
            rawThreads: raw.threads,
            ratio: round(c1.p50Ms.median / raw.medianMs, 2),
          });
        }
      }
    }
  }
  const srv = (r.http ?? []).find((t) => t.name === server && t.points.length > 0);
  if (srv) {
    for (const peer of (r.http ?? []).filter((t) => t.kind !== 'gateway' && t.kind !== 'raw' && t.points.length > 0)) {
      for (const p of srv.points) {
        const q = peer.points.find((x) => x.workload === p.workload && x.concurrency === p.concurrency);
        if (!q) continue;
        ratios.serverVsPeers.push({
          server: srv.name,
          peer: peer.name,
          workload: p.workload,
          concurrency: p.concurrency,
          throughputRatio: round(p.unitsPerSec.median / q.unitsPerSec.median, 2),
          p50Ratio: round(p.p50Ms.median / q.p50Ms.median, 2),
        });
      }
    }
  } else if (r.http) {
    ratios.notes.push(`no HTTP results for the server "${server}": server-vs-peer ratios not computed`);
  }
  for (const p of r.peers ?? []) {
    const ceil = ceilingFor(p.unit);
    if (ceil)
      ratios.peersVsCeiling.push({
        peer: p.peer,
        case: p.case,
        perSec: p.perSec.median,
        ceiling: ceil,
        ratio: round(p.perSec.median / ceil, 3),
      });
  }
  if (!c && (r.http || r.peers)) ratios.notes.push('no ceiling available: ratios to the ceiling not computed');
  ratios.notes.push('rerank vs ceiling uses the best of all concurrency levels; embeddings use concurrency >= 32');
  if (raws.length)
    ratios.notes.push(
      'side by side: raw ORT (ort, ort-int8) in every layout that can win, measured in the same rotation as the servers; each point is held to the best layout at that point; at concurrency 1 single-input workloads are held to the fastest layout running one input alone',
    );
  return ratios;
}

// ---------------------------------------------------------------------------------------------
// Printing

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows
    .map((r) => r.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  '))
    .join('\n');
}

/** Which threads run the model: a server's workers, every thread of raw ORT. */
const modelThreads = (t: HttpTargetResult): string => (t.kind === 'raw' ? 'units' : 'units (workers)');

function printReport(r: BenchReport): void {
  const out: string[] = [];
  const m = r.machine;
  out.push(`\n== onnx-gateway bench ${r.quick ? '(QUICK smoke) ' : ''}${r.startedAt}, ${r.durationS} s`);
  out.push(
    `machine: ${m.cpuModel}, ${m.cores} cores [${m.cpuFlags.filter((f) => f.startsWith('avx512')).length ? 'AVX-512' : m.cpuFlags.includes('avx2') ? 'AVX2' : 'no AVX2'}], ${m.memTotalMB} MB; Node ${m.node}; onnxruntime-node ${m.onnxruntimeNode}; load ${m.loadavg.join(' ')} -> ${r.loadavgAfter.join(' ')}`,
  );
  out.push('values: median [min-max] of repeats');

  const c = r.ceiling;
  if (c) {
    out.push(
      `\n-- ceiling: raw ORT${r.ceilingFrom ? ` (from ${r.ceilingFrom})` : ''}; mix ${c.mix.count} inputs, ${c.mix.tokens} tokens, mean ${c.mix.mean} (${c.mix.min}-${c.mix.max}), ${c.mix.truncated} truncated; rerank ${c.rerankPairs.count} pairs, mean ${c.rerankPairs.mean} tokens`,
    );
    out.push(
      `fp32 MatMul ${c.matmul[0]?.size ?? ''}^3 peak: ${c.matmul.map((p) => `${p.sessions}x${p.threads}t ${fmtSpread(p.gflops)}`).join(', ')} GFLOP/s; model ${round(c.flopsPerToken.atMeanLength / 1e6, 2)} MFLOP/token at mean length`,
    );
    for (const [name, points, unit] of [
      ['embed', c.embed, 'inputs/s'],
      ['rerank', c.rerank, 'pairs/s'],
    ] as const) {
      const base = points.filter((p) => p.arena && p.spinning !== '0');
      const batches = [...new Set(base.map((p) => p.batch))].sort((a, b) => a - b);
      const layouts = [...new Set(base.map((p) => `${p.sessions}x${p.threads}`))];
      const rows = [[`${name} ${unit}`, ...batches.map((b) => `batch ${b}`)]];
      for (const l of layouts)
        rows.push([
          `${l.replace('x', ' sess x ')} thr`,
          ...batches.map((b) =>
            fmtSpread(base.find((p) => `${p.sessions}x${p.threads}` === l && p.batch === b)?.inputsPerSec),
          ),
        ]);
      out.push(table(rows));
      const variants = points.filter((p) => !p.arena || p.spinning === '0');
      if (variants.length)
        out.push(
          `options: ${variants.map((p) => `${p.sessions}x${p.threads}t b${p.batch} arena ${p.arena ? 'on' : 'off'} spin ${p.spinning ?? '-'}: ${fmtSpread(p.inputsPerSec)}`).join('; ')}`,
        );
      const best = name === 'embed' ? c.bestEmbed : c.bestRerank;
      if (best)
        out.push(
          `best ${name}: ${best.sessions} sess x ${best.threads} thr, batch ${best.batch}, arena ${best.arena ? 'on' : 'off'}: ${fmtSpread(best.inputsPerSec)} ${unit}, ${best.tokensPerSec.median} tok/s, ${best.gflops.median} GFLOP/s = ${Math.round((best.gflops.median / c.matmulPeakGflops) * 100)}% of MatMul peak, padding ${Math.round(best.paddingShare * 100)}%`,
        );
    }
    for (const l of c.singleLatency) {
      out.push(
        `1 input alone (1 sess x ${l.threads} thr): median ${l.medianMs} ms, p90 ${l.p90Ms} ms; by tokens ${Object.entries(
          l.byBucket,
        )
          .map(([b, v]) => `${b}: ${v.medianMs}`)
          .join(', ')}`,
      );
    }
    if (c.int8) {
      const i8 = c.int8;
      out.push(`int8 (${i8.embedModel}, ${i8.rerankModel}):`);
      for (const p of [...i8.embed, ...i8.rerank])
        out.push(
          `  ${p.workload} ${p.sessions} sess x ${p.threads} thr batch ${p.batch}: ${fmtSpread(p.inputsPerSec)} ${p.workload === 'embed' ? 'inputs' : 'pairs'}/s`,
        );
      if (i8.bestEmbed && c.bestEmbed)
        out.push(
          `best int8 / best fp32: embed x${round(i8.bestEmbed.inputsPerSec.median / c.bestEmbed.inputsPerSec.median, 2)}${i8.bestRerank && c.bestRerank ? `, rerank x${round(i8.bestRerank.inputsPerSec.median / c.bestRerank.inputsPerSec.median, 2)}` : ''}`,
        );
      for (const l of i8.singleLatency)
        out.push(`int8 1 input alone (1 sess x ${l.threads} thr): median ${l.medianMs} ms`);
    }
  }
  if (r.peers) {
    out.push('\n-- peers in-process (no HTTP)');
    out.push(
      table([
        ['peer / case', 'per s', 'unit'],
        ...r.peers.map((p) => [`${p.peer} ${p.case}`, fmtSpread(p.perSec), p.unit]),
      ]),
    );
  }
  if (r.micro) {
    out.push('\n-- micro');
    out.push(
      table([
        ['case', 'impl', 'units/s', 'us/call'],
        ...r.micro.map((x) => [
          x.name,
          x.impl,
          x.unitsPerSec ? `${fmtSpread(x.unitsPerSec, 0)} ${x.unit}s` : (x.note ?? ''),
          x.usPerCall === null ? '' : String(x.usPerCall),
        ]),
      ]),
    );
  }
  if (r.http) {
    out.push('\n-- http: units/s  p50/p99 ms');
    for (const t of r.http) {
      if (t.error) {
        out.push(`${t.name}: not run: ${t.error.split('\n')[0]}`);
        continue;
      }
      const wls = [...new Set(t.points.map((p) => p.workload))];
      const cs = [...new Set(t.points.map((p) => p.concurrency))].sort((a, b) => a - b);
      const rows = [
        [
          t.kind === 'raw' ? `${t.name} (raw ORT beside the servers)` : `${t.name} (idle ping ${t.idlePingMs} ms)`,
          ...cs.map((x) => `c=${x}`),
        ],
      ];
      for (const wl of wls) {
        rows.push([
          wl,
          ...cs.map((x) => {
            const p = t.points.find((q) => q.workload === wl && q.concurrency === x);
            return p
              ? `${fmtSpread(p.unitsPerSec)}  ${round(p.p50Ms.median, 0)}/${round(p.p99Ms.median, 0)}${p.non2xx || p.errors ? ` !${p.non2xx + p.errors}` : ''}`
              : '';
          }),
        ]);
      }
      out.push(table(rows));
      for (const wl of wls) {
        const used = t.points
          .filter((p) => p.workload === wl && p.cpuPct)
          .map((p) => `c=${p.concurrency} ${p.cpuPct!.main}/${p.cpuPct!.other}/${p.cpuPct!.loadGen}`);
        if (used.length)
          out.push(`  cpu % of a core, ${wl} (main thread / other threads / load generator): ${used.join(', ')}`);
        const per = t.points
          .filter((p) => p.workload === wl && p.cpuPerRequestMs)
          .map(
            (p) =>
              `c=${p.concurrency} ${p.cpuPerRequestMs!.main}/${p.cpuPerRequestMs!.other} ms, ${p.unitsPerWorkerCoreSecond} ${p.unit}/core-s`,
          );
        if (per.length)
          out.push(
            `  cpu per request (main thread / other threads), ${modelThreads(t)} per core-second of the model's threads: ${per.join(', ')}`,
          );
        const split = t.points
          .filter((p) => p.workload === wl && p.phasesMs)
          .map(
            (p) =>
              `c=${p.concurrency} ${Object.entries(p.phasesMs!)
                .map(([phase, ms]) => `${phase} ${ms}`)
                .join(', ')}`,
          );
        if (split.length) out.push(`  mean ms per request by phase (Server-Timing): ${split.join('; ')}`);
      }
      for (const [wl, v] of Object.entries(t.validation)) if (v) out.push(`  ${wl} failed validation: ${v}`);
      if (t.skipped.length)
        out.push(
          `  skipped (expected latency too long): ${t.skipped.map((x) => `${x.workload} c=${x.concurrency} (${x.expectedLatencyS} s)`).join(', ')}`,
        );
    }
  }
  const ra = r.ratios;
  if (
    ra.vsCeiling.length ||
    ra.vsSideBySide.length ||
    ra.serverVsPeers.length ||
    ra.c1LatencyVsRaw.length ||
    ra.peersVsCeiling.length
  ) {
    out.push('\n-- ratios');
    for (const x of ra.vsCeiling)
      out.push(
        `${x.target} ${x.workload} (c=${x.concurrency}) / ${x.ceilingOf} ceiling: ${x.unitsPerSec} / ${x.ceiling} = ${x.ratio}`,
      );
    for (const x of ra.vsSideBySide)
      out.push(
        `${x.target} ${x.workload} c=${x.concurrency} / best raw beside it (${x.raw}): ${x.unitsPerSec} / ${x.rawUnitsPerSec} = ${x.ratio}  [${x.layouts.map((l) => `${l.raw} ${l.unitsPerSec}`).join(', ')}]`,
      );
    for (const x of ra.c1LatencyVsSideBySide)
      out.push(
        `${x.target} ${x.workload} c=1 p50 ${x.p50Ms} ms vs ${x.raw} 1 input alone beside it ${x.rawP50Ms} ms: ${x.overMs >= 0 ? '+' : ''}${x.overMs} ms`,
      );
    for (const x of ra.peersVsCeiling)
      out.push(`${x.peer} in-process ${x.case} / ceiling: ${x.perSec} / ${x.ceiling} = ${x.ratio}`);
    for (const x of ra.serverVsPeers)
      out.push(
        `${x.server} vs ${x.peer} ${x.workload} c=${x.concurrency}: throughput x${x.throughputRatio}, p50 x${x.p50Ratio}`,
      );
    for (const x of ra.c1LatencyVsRaw)
      out.push(
        `${x.target} ${x.workload} c=1 p50 ${x.p50Ms} ms / raw ORT 1 input (${x.rawThreads} thr) ${x.rawMs} ms = ${x.ratio}`,
      );
  }
  for (const n of ra.notes) out.push(`note: ${n}`);
  for (const [k, v] of Object.entries(r.errors)) out.push(`ERROR in ${k}: ${v.split('\n')[0]}`);
  process.stdout.write(out.join('\n') + '\n');
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const f = parseFlags(argv);
  const quick = f.quick === true;
  const sections = flagList(f, 'only', [...SECTIONS]) as Section[];
  for (const s of sections)
    if (!SECTIONS.includes(s)) throw new Error(`--only: unknown section "${s}" (${SECTIONS.join(', ')})`);
  const machine = machineInfo();
  const repeats = flagNumber(f, 'repeats', quick ? 1 : 3);
  const embedModel = flagString(f, 'embed-model', DEFAULT_EMBED_MODEL);
  const rerankModel = flagString(f, 'rerank-model', DEFAULT_RERANK_MODEL);
  // int8 side by side whenever the int8 variants exist (`models quantize`), unless --no-int8.
  const int8 = f['no-int8'] !== true && hasOnnx(`${embedModel}:int8`) && hasOnnx(`${rerankModel}:int8`);
  const started = new Date();
  const errors: Record<string, string> = {};
  log(`bench: ${sections.join(', ')}${quick ? ' (quick)' : ''}, repeats ${repeats}, models dir ${modelsDir()}`);

  let micro: MicroResult[] | null = null;
  let ceiling: CeilingResult | null = null;
  let ceilingFrom: string | null = null;
  let peers: PeerPoint[] | null = null;
  let http: HttpTargetResult[] | null = null;

  const guarded = async (name: Section, fn: () => Promise<void>): Promise<void> => {
    if (!sections.includes(name)) return;
    log(`\n== ${name}`);
    try {
      await fn();
    } catch (error) {
      errors[name] = (error as Error).stack ?? String(error);
      log(`${name} failed: ${(error as Error).message}`);
    }
  };

  await guarded('micro', async () => {
    micro = await runMicro({
      n: flagNumber(f, 'n', quick ? 64 : 256),
      repeats,
      minMs: quick ? 300 : 1000,
      modelId: embedModel,
    });
  });
  await guarded('ceiling', async () => {
    const d = ceilingDefaults(quick, machine.cores);
    ceiling = await runCeiling({
      ...d,
      repeats,
      n: flagNumber(f, 'n', d.n),
      sessions: flagNumbers(f, 'sessions', d.sessions),
      threads: flagNumbers(f, 'threads', d.threads),
      batchSizes: flagNumbers(f, 'batches', d.batchSizes),
      embedModel,
      rerankModel,
      int8BatchSizes: int8 ? d.int8BatchSizes : [],
    });
  });
  await guarded('peers', async () => {
    peers = await runPeersChild([
      ...(quick ? ['--quick'] : []),
      '--repeats',
      String(repeats),
      ...(typeof f.n === 'string' ? ['--n', f.n] : []),
    ]);
  });
  // Ratios and the raw targets' layouts need a ceiling: without one in this run, borrow the last saved one (and say so).
  let ceilingForRatios: CeilingResult | null = ceiling;
  const latestPath = join(RESULTS_DIR, 'latest.json');
  if (!ceilingForRatios && (sections.includes('http') || peers) && existsSync(latestPath)) {
    try {
      const prev = readJson<BenchReport>(latestPath);
      if (prev.ceiling) {
        ceilingForRatios = prev.ceiling;
        ceilingFrom = `latest.json of ${prev.startedAt}`;
      }
    } catch {
      /* unreadable: no ratios */
    }
  }

  await guarded('http', async () => {
    const d = httpDefaults(quick);
    const layout = ({ sessions, threads, batch }: CeilingPoint) => ({ sessions, threads, batch });
    const pair = (embed?: CeilingPoint | null, rerank?: CeilingPoint | null) =>
      embed && rerank ? { embed: layout(embed), rerank: layout(rerank) } : undefined;
    http = await runHttp({
      ...d,
      repeats,
      targets: flagList(f, 'targets', int8 ? [...d.targets, 'gateway-int8', 'ort-int8'] : d.targets),
      rawLayouts: {
        fp32: pair(ceilingForRatios?.bestEmbed, ceilingForRatios?.bestRerank),
        int8: pair(ceilingForRatios?.int8?.bestEmbed, ceilingForRatios?.int8?.bestRerank),
      },
      n: flagNumber(f, 'n', d.n),
      single: flagNumbers(f, 'concurrency', d.single),
      batch: flagNumbers(f, 'batch-concurrency', d.batch),
      rerank: flagNumbers(f, 'rerank-concurrency', d.rerank),
      durationS: flagNumber(f, 'duration', d.durationS),
      maxDurationS: flagNumber(f, 'max-duration', d.maxDurationS),
      batchInputs: flagNumber(f, 'batch-inputs', BATCH_WHILE_ONLINE.inputs),
      image: flagNumbers(f, 'image-concurrency', d.image ?? [16]),
      imageModel: flagString(f, 'image-model', DEFAULT_IMAGE_MODEL),
      imageDevice: flagString(f, 'image-device', '') || undefined,
      only: typeof f.workloads === 'string' ? f.workloads.split(',') : undefined,
      embedModel,
      rerankModel,
      gatewayFromSrc: f['gateway-from-src'] === true,
      apiKey: flagString(f, 'api-key', process.env.BENCH_API_KEY ?? '') || null,
    });
  });

  const finished = new Date();
  const report: BenchReport = {
    schema: 1,
    startedAt: started.toISOString(),
    finishedAt: finished.toISOString(),
    durationS: Math.round((finished.getTime() - started.getTime()) / 1000),
    argv,
    quick,
    repeats,
    sections,
    machine,
    loadavgAfter: machineInfo().loadavg,
    allocator: allocatorEnvironment(),
    // Relative, so results name no machine's paths.
    models: {
      dir: relative(process.cwd(), modelsDir()) || '.',
      embed: embedModel,
      rerank: rerankModel,
      ...(flagList(f, 'workloads', []).some(isImageWorkload)
        ? { image: flagString(f, 'image-model', DEFAULT_IMAGE_MODEL) }
        : {}),
    },
    ceiling: ceilingForRatios,
    ceilingFrom,
    peers,
    http,
    micro,
    ratios: computeRatios({ ceiling: ceilingForRatios, http, peers }, flagString(f, 'server', 'gateway')),
    errors,
  };

  mkdirSync(RESULTS_DIR, { recursive: true });
  const stamp = started
    .toISOString()
    .replace(/[:]/g, '-')
    .replace(/\.\d+Z$/, 'Z');
  const json = JSON.stringify(report, null, 2) + '\n';
  const svg = renderChart(report);
  const bad = checkXml(svg);
  if (bad) errors.chart = `SVG is not well-formed: ${bad}`;
  // Write through a .tmp name (git-ignored) and rename, so a reader never sees half a file.
  const write = (name: string, data: string): void => {
    const tmp = join(RESULTS_DIR, `${name}.tmp`);
    writeFileSync(tmp, data);
    renameSync(tmp, join(RESULTS_DIR, name));
  };
  write(`${stamp}.json`, json);
  write('latest.json', json);
  write('latest.svg', svg);
  printReport(report);
  log(
    `\nwrote bench/results/${stamp}.json, latest.json, latest.svg${bad ? ` (chart check FAILED: ${bad})` : ' (chart: well-formed XML)'}`,
  );
  if (Object.keys(errors).length) process.exitCode = 1;
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
