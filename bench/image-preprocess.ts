/**
 * Image preprocessing bench: CPU time per image of our decode + preprocess (src/worker/image-preprocess:
 * sharp's decode, our Pillow-exact resample, crop, rescale, normalise) against Pillow's own path on the
 * same files in the same run (bench/pillow-preprocess.py: load_image, Pillow's resize, numpy as
 * transformers' slow image processors do it), single-threaded each.
 *
 *   npx tsx bench/image-preprocess.ts [--rounds 5] [--workloads small-png,photo-jpeg] [--processors clip,siglip]
 *
 * Workloads: `small-png`, 224x224 PNGs (40 files); `photo-jpeg`, 1920x1080 photo-like JPEGs at quality 90
 * (12 files). Ours is timed with process.cpuUsage (every thread of the process: sharp decodes on
 * libuv's pool, with libvips limited to one thread), Pillow's with time.process_time, each from the
 * file bytes in memory to the channel-first float32 pixel values. Values are the median of the
 * rounds' mean ms per image; each side warms every processor up on every file first (ours three
 * passes: V8 compiles its hot loops on the way), and their
 * rounds alternate (Pillow's in a python process serving rounds on request). Writes
 * results/image-preprocess-<timestamp>.json and results/image-preprocess-latest.json.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import sharp from 'sharp';
import { readImageProcessor, type ImageProcessorSpec, type Resample } from '../src/models/image-processor.js';
import { preprocessInto } from '../src/worker/image-preprocess/index.js';
import { clipConfig, siglipConfig } from '../test/fixtures/preprocessor-configs.js';
import {
  allocatorEnvironment,
  BENCH_DIR,
  RESULTS_DIR,
  flagList,
  flagNumber,
  log,
  machineInfo,
  median,
  parseFlags,
  round,
  type MachineInfo,
} from './lib/common.js';

const PYTHON = '/usr/bin/python3';
const script = join(BENCH_DIR, 'pillow-preprocess.py');
const PIL_CODES: Record<Resample, number> = { nearest: 0, lanczos: 1, bilinear: 2, bicubic: 3, box: 4, hamming: 5 };
const processors: Record<string, unknown> = { clip: clipConfig, siglip: siglipConfig };
const WARMUP_PASSES = 3;
const workloadFiles: Record<string, RegExp> = { 'small-png': /^small-.*\.png$/, 'photo-jpeg': /^photo-.*\.jpg$/ };

export interface PreprocessCase {
  workload: string;
  processor: string;
  files: number;
  /** Median over rounds of the mean CPU ms per image. */
  oursMs: number;
  pillowMs: number;
  /** ours / Pillow: below 1 is faster than Pillow. */
  ratio: number;
  oursRounds: number[];
  pillowRounds: number[];
}

export interface PreprocessReport {
  when: string;
  command: string;
  machine: MachineInfo;
  sharp: string;
  /** The C allocator's settings both sides ran under (MALLOC_*, GLIBC_TUNABLES, LD_PRELOAD). */
  allocator: Record<string, string>;
  pillow: string;
  numpy: string;
  cases: PreprocessCase[];
}

/** The processor's steps as pillow-preprocess.py takes them. */
function pythonProcessor(spec: ImageProcessorSpec): Record<string, unknown> {
  const resize = spec.resize!;
  return {
    ...('shortestEdge' in resize
      ? { shortest_edge: resize.shortestEdge }
      : { height: resize.height, width: resize.width }),
    ...(spec.crop ? { crop: [spec.crop.height, spec.crop.width] } : {}),
    resample: PIL_CODES[spec.resample],
    rescale: spec.rescale,
    mean: spec.mean,
    std: spec.std,
  };
}

/** pillow-preprocess.py serving rounds: one line asks for a round, one line answers its ms per image. */
async function startPillow(files: string[], specs: Record<string, ImageProcessorSpec>) {
  const processors = Object.fromEntries(Object.entries(specs).map(([name, spec]) => [name, pythonProcessor(spec)]));
  // The allocator's settings (MALLOC_*, GLIBC_TUNABLES, LD_PRELOAD) reach both sides alike.
  const child = spawn(PYTHON, [script, 'serve', JSON.stringify({ files, processors })], {
    env: { ...process.env, OMP_NUM_THREADS: '1', OPENBLAS_NUM_THREADS: '1' },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const line = await lines.next();
    if (line.done) throw new Error('pillow-preprocess.py ended early');
    return line.value;
  };
  const versions = JSON.parse(await next()) as { pillow: string; numpy: string };
  return {
    versions,
    async round(name: string): Promise<number> {
      child.stdin.write(`${name}\n`);
      return Number(await next());
    },
    close: () => child.stdin.end(),
  };
}

/** Our side of one round: CPU ms per image of one pass over the files. */
async function oursRound(images: Uint8Array[], spec: ImageProcessorSpec, out: Float32Array): Promise<number> {
  const start = process.cpuUsage();
  for (const bytes of images) await preprocessInto(bytes, spec, out, 0, 100_000_000);
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000 / images.length;
}

async function main(): Promise<void> {
  const flags = parseFlags(process.argv.slice(2));
  const rounds = flagNumber(flags, 'rounds', 5);
  const workloads = flagList(flags, 'workloads', Object.keys(workloadFiles));
  const names = flagList(flags, 'processors', Object.keys(processors));
  // One thread each: libvips' own threads off, as Pillow decodes and resizes on one.
  sharp.concurrency(1);
  sharp.cache(false);

  const dir = mkdtempSync(join(tmpdir(), 'onnx-gateway-preprocess-bench-'));
  try {
    const made = spawnSync(PYTHON, [script, 'make', dir], { encoding: 'utf8' });
    if (made.status !== 0) throw new Error(`pillow-preprocess.py make failed: ${made.stderr}`);
    const cases: PreprocessCase[] = [];
    let versions = { pillow: 'unknown', numpy: 'unknown' };
    for (const workload of workloads) {
      const pattern = workloadFiles[workload];
      if (!pattern) throw new Error(`unknown workload ${workload}; known: ${Object.keys(workloadFiles).join(', ')}`);
      const files = readdirSync(dir)
        .filter((f) => pattern.test(f))
        .sort()
        .map((f) => join(dir, f));
      const specs = Object.fromEntries(
        names.map((name) => {
          const config = processors[name];
          if (!config) throw new Error(`unknown processor ${name}; known: ${Object.keys(processors).join(', ')}`);
          return [name, readImageProcessor(config)];
        }),
      );
      log(`${workload}: ${files.length} files, ${rounds} rounds of each of ${names.join(', ')}, alternating`);
      const pillow = await startPillow(files, specs);
      versions = pillow.versions;
      const images = files.map((f) => new Uint8Array(readFileSync(f)));
      const outs = Object.fromEntries(
        Object.entries(specs).map(([name, spec]) => [name, new Float32Array(3 * spec.height * spec.width)]),
      );
      // Warm-up, as the Python side did before answering; a few passes, so that V8 has optimised the
      // hot loops as it has in a running server (a single pass of 12 photos leaves them half-compiled).
      for (let pass = 0; pass < WARMUP_PASSES; pass++)
        for (const name of names) await oursRound(images, specs[name]!, outs[name]!);
      const ours: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
      const theirs: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
      try {
        // Rounds alternate between the two sides, so that both see the machine's same minutes.
        for (let r = 0; r < rounds; r++) {
          for (const name of names) {
            theirs[name]!.push(await pillow.round(name));
            ours[name]!.push(await oursRound(images, specs[name]!, outs[name]!));
          }
        }
      } finally {
        pillow.close();
      }
      for (const name of names) {
        const oursMs = median(ours[name]!);
        const pillowMs = median(theirs[name]!);
        cases.push({
          workload,
          processor: name,
          files: files.length,
          oursMs: round(oursMs, 3),
          pillowMs: round(pillowMs, 3),
          ratio: round(oursMs / pillowMs, 3),
          oursRounds: ours[name]!.map((x) => round(x, 3)),
          pillowRounds: theirs[name]!.map((x) => round(x, 3)),
        });
        log(
          `  ${name}: ours ${oursMs.toFixed(2)} ms/image, Pillow ${pillowMs.toFixed(2)} ms/image: ${(oursMs / pillowMs).toFixed(2)}x`,
        );
      }
    }
    const report: PreprocessReport = {
      when: new Date().toISOString(),
      command: `npx tsx bench/image-preprocess.ts ${process.argv.slice(2).join(' ')}`.trim(),
      machine: machineInfo(),
      sharp: sharp.versions.sharp ?? 'unknown',
      allocator: allocatorEnvironment(),
      pillow: versions.pillow,
      numpy: versions.numpy,
      cases,
    };
    const text = JSON.stringify(report, null, 2) + '\n';
    writeFileSync(join(RESULTS_DIR, `image-preprocess-${report.when.replace(/[:.]/g, '-')}.json`), text);
    writeFileSync(join(RESULTS_DIR, 'image-preprocess-latest.json'), text);
    console.log('| workload | processor | ours ms/image | Pillow ms/image | ours / Pillow |');
    console.log('|---|---|---|---|---|');
    for (const c of cases)
      console.log(`| ${c.workload} | ${c.processor} | ${c.oursMs} | ${c.pillowMs} | ${c.ratio}x |`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
