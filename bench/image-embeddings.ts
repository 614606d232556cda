/**
 * Image embeddings bench: images/s of the gateway's HTTP API (one image a request, as a data URI,
 * at --concurrency connections) against raw onnxruntime-node running the same vision graph on the
 * same images already preprocessed (their pixel_values computed once, before the clock), measured
 * side by side: each round measures the gateway and every raw layout in turn, the order rotating,
 * and each round's ratio is the gateway's rate over the best raw layout's in that round.
 *
 *   npx tsx bench/image-embeddings.ts [--model Xenova/clip-vit-base-patch32] [--concurrency 16]
 *                                     [--workloads embed-image-224,embed-image-photo] [--rounds 3]
 *                                     [--duration 15] [--gateway-from-src]
 *
 * Workloads: `embed-image-224`, 16 JPEGs near the model's size (224x224 to 256x298; the resize is
 * small or none); `embed-image-photo`, 8 photo-like 1920x1080 JPEGs at quality 90 (smooth gradients,
 * edges and sensor-like noise, so that decoding them costs what a photo's decode costs). Both are made
 * here, deterministically. The gateway decodes and preprocesses every image (its cache off); raw ORT
 * does neither, so the ratio is what the whole server path costs against inference alone.
 *
 * The model comes from ONNX_GATEWAY_MODELS_DIR (default `.data/standins-real`, where
 * `python3 scripts/standins/make_standins.py --out .data/standins-real --size real --no-golden --only
 * Xenova/clip-vit-base-patch32` writes a stand-in of the real model's sizes, random weights). Raw
 * layouts: one session per core of one intra-op thread and one session of every core, at batch 1,
 * and one session of every core at batch --concurrency (what the gateway can batch at most). Writes
 * results/image-embeddings-<timestamp>.json and results/image-embeddings-latest.json.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import sharp from 'sharp';
import { SessionGroup, sessionOptions } from './ceiling.js';
import type { RawFeed } from './ceiling-worker.js';
import { LoadGenerator, startChild } from './http.js';
import {
  REPO_ROOT,
  RESULTS_DIR,
  flagList,
  flagNumber,
  flagString,
  log,
  machineInfo,
  median,
  parseFlags,
  round,
  type MachineInfo,
} from './lib/common.js';
import { readImageProcessor } from '../src/models/image-processor.js';
import { preprocessInto } from '../src/worker/image-preprocess/index.js';
import { commandLineFlags } from '../src/v8-flags.js';

interface RawLayout {
  sessions: number;
  threads: number;
  batch: number;
}

export interface ImageEmbeddingPoint {
  workload: string;
  images: number;
  concurrency: number;
  /** Median over rounds of images/s. */
  gateway: number;
  /** Median over rounds of the best raw layout's images/s in each round. */
  raw: number;
  /** Median over rounds of gateway / best raw layout in the same round. */
  ratio: number;
  gatewayRounds: number[];
  rawRounds: Record<string, number[]>;
  ratioRounds: number[];
  gatewayP50Ms: number;
  gatewayP99Ms: number;
}

export interface ImageEmbeddingReport {
  when: string;
  command: string;
  machine: MachineInfo;
  model: string;
  points: ImageEmbeddingPoint[];
}

// ---------------------------------------------------------------------------------------------
// Images

/** A small deterministic PRNG (mulberry32), so the images are the same on every run. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Photo-like RGB: gradients and rings, a few hard-edged shapes, Gaussian noise (sigma 9). */
function photoPixels(width: number, height: number, seed: number): Uint8Array {
  const random = prng(seed);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  const shapes = Array.from({ length: 6 }, () => ({
    x: random() * width,
    y: random() * height,
    r: (0.05 + random() * 0.2) * Math.min(width, height),
    rgb: [random() * 255, random() * 255, random() * 255],
  }));
  const out = new Uint8Array(width * height * 3);
  for (let y = 0, i = 0; y < height; y++) {
    for (let x = 0; x < width; x++, i += 3) {
      let r = 128 + 100 * Math.sin(x / (width / 3.1) + seed) * Math.cos(y / (height / 2.3));
      let g = (255 * (x + y)) / (width + height);
      let b = 128 + 90 * Math.cos(Math.hypot(x - width * 0.6, y - height * 0.4) / (Math.min(width, height) / 7 + 1));
      for (const s of shapes) {
        if ((x - s.x) ** 2 + (y - s.y) ** 2 < s.r * s.r) [r, g, b] = [s.rgb[0]!, s.rgb[1]!, s.rgb[2]!];
      }
      out[i] = Math.min(255, Math.max(0, r + 9 * gauss()));
      out[i + 1] = Math.min(255, Math.max(0, g + 9 * gauss()));
      out[i + 2] = Math.min(255, Math.max(0, b + 9 * gauss()));
    }
  }
  return out;
}

async function jpeg(width: number, height: number, seed: number): Promise<Uint8Array> {
  const pixels = photoPixels(width, height, seed);
  return new Uint8Array(
    await sharp(pixels, { raw: { width, height, channels: 3 } })
      .jpeg({ quality: 90 })
      .toBuffer(),
  );
}

const SMALL_SIZES: Array<[number, number]> = [
  [224, 224],
  [256, 224],
  [224, 298],
  [240, 240],
];

const workloadImages: Record<string, () => Promise<Uint8Array[]>> = {
  'embed-image-224': () => Promise.all(Array.from({ length: 16 }, (_, i) => jpeg(...SMALL_SIZES[i % 4]!, i))),
  'embed-image-photo': () => Promise.all(Array.from({ length: 8 }, (_, i) => jpeg(1920, 1080, 100 + i))),
};

// ---------------------------------------------------------------------------------------------
// Raw ONNX Runtime

/** The images' pixel_values in batches of `batch` (the images repeated to fill the last one). */
function feeds(pixels: Float32Array[], batch: number, size: number): RawFeed[] {
  const plane = 3 * size * size;
  const count = Math.ceil(pixels.length / batch);
  return Array.from({ length: count }, (_, f) => {
    const data = new Float32Array(batch * plane);
    for (let i = 0; i < batch; i++) data.set(pixels[(f * batch + i) % pixels.length]!, i * plane);
    return { kind: 'raw', tensors: { pixel_values: { data, dims: [batch, 3, size, size] } } } satisfies RawFeed;
  });
}

class RawLane {
  private offset = 0;
  private constructor(
    readonly name: string,
    private readonly group: SessionGroup,
    private readonly batches: RawFeed[],
    private readonly batch: number,
  ) {}

  static async open(path: string, layout: RawLayout, pixels: Float32Array[], size: number): Promise<RawLane> {
    const group = await SessionGroup.start(
      { model: path, options: sessionOptions(layout.threads, { arena: true, spinning: null }) },
      layout.sessions,
    );
    const batches = feeds(pixels, layout.batch, size);
    await group.load(batches, [0]);
    return new RawLane(`ort-${layout.sessions}x${layout.threads}-b${layout.batch}`, group, batches, layout.batch);
  }

  /** Images/s over at least `durationS`, continuing where the last measurement stopped. */
  async measure(durationS: number): Promise<number> {
    let images = 0;
    let wall = 0;
    do {
      const chunk = Math.max(2, this.batches.length);
      const { wallMs, runs } = await this.group.run(chunk, this.offset);
      images += runs.length * this.batch;
      this.offset = (this.offset + chunk) % this.batches.length;
      wall += wallMs;
    } while (wall < durationS * 1000);
    return images / (wall / 1000);
  }

  close(): Promise<void> {
    return this.group.close();
  }
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const flags = parseFlags(process.argv.slice(2));
  const model = flagString(flags, 'model', 'Xenova/clip-vit-base-patch32');
  const concurrency = flagNumber(flags, 'concurrency', 16);
  const rounds = flagNumber(flags, 'rounds', 3);
  const durationS = flagNumber(flags, 'duration', 15);
  const workloads = flagList(flags, 'workloads', Object.keys(workloadImages));
  const modelsDir = resolve(process.env.ONNX_GATEWAY_MODELS_DIR ?? join(REPO_ROOT, '.data', 'standins-real'));
  const dir = join(modelsDir, ...model.split('/'));
  const vision = join(dir, 'onnx', 'vision_model.onnx');
  if (!existsSync(vision))
    throw new Error(
      `${vision} does not exist: python3 scripts/standins/make_standins.py --out .data/standins-real --size real --no-golden --only ${model}`,
    );
  const spec = readImageProcessor(JSON.parse(readFileSync(join(dir, 'preprocessor_config.json'), 'utf8')));
  if (spec.width !== spec.height) throw new Error('the bench feeds square pixel_values');
  const cores = machineInfo().cores;
  const layouts: RawLayout[] = [
    { sessions: cores, threads: 1, batch: 1 },
    ...(cores > 1 ? [{ sessions: 1, threads: cores, batch: 1 }] : []),
    { sessions: 1, threads: cores, batch: concurrency },
  ];

  const fromSrc = flags['gateway-from-src'] === true;
  const cli = fromSrc ? join(REPO_ROOT, 'src', 'cli', 'index.ts') : join(REPO_ROOT, 'dist', 'cli', 'index.js');
  if (!existsSync(cli)) throw new Error(`${cli} does not exist (run \`npm run build\`, or pass --gateway-from-src)`);
  log(`gateway: ${model} from ${modelsDir}`);
  const gateway = await startChild(
    'gateway',
    (port, apiKey) =>
      spawn(
        process.execPath,
        [...commandLineFlags, ...(fromSrc ? ['--import', import.meta.resolve('tsx')] : []), cli, 'serve'],
        {
          cwd: REPO_ROOT,
          stdio: ['ignore', 'pipe', 'pipe'],
          env: {
            ...process.env,
            ONNX_GATEWAY_MODELS_DIR: modelsDir,
            ONNX_GATEWAY_MODELS: model,
            // Every request repeats an image: with the cache on, the gateway would answer from it.
            ONNX_GATEWAY_CACHE_MAX_MB: '0',
            ONNX_GATEWAY_PORT: String(port),
            ONNX_GATEWAY_HOST: '127.0.0.1',
            ONNX_GATEWAY_API_KEYS: apiKey,
            ONNX_GATEWAY_LOG_LEVEL: process.env.ONNX_GATEWAY_LOG_LEVEL ?? 'warn',
          },
        },
      ),
    300_000,
  );
  const load = new LoadGenerator();
  const points: ImageEmbeddingPoint[] = [];
  try {
    for (const workload of workloads) {
      const make = workloadImages[workload];
      if (!make) throw new Error(`unknown workload ${workload}; known: ${Object.keys(workloadImages).join(', ')}`);
      const images = await make();
      const pixels = await Promise.all(
        images.map(async (bytes) => {
          const out = new Float32Array(3 * spec.width * spec.height);
          await preprocessInto(bytes, spec, out, 0, 100_000_000);
          return out;
        }),
      );
      const bodies = images.map((bytes) =>
        JSON.stringify({
          model,
          input: [
            {
              type: 'image_url',
              image_url: { url: `data:image/jpeg;base64,${Buffer.from(bytes).toString('base64')}` },
            },
          ],
        }),
      );
      const headers = { authorization: `Bearer ${gateway.apiKey}`, 'content-type': 'application/json' };
      // One request checked, and the vision tower loaded and warm, before anything is timed.
      for (const body of bodies) {
        const res = await fetch(`${gateway.url}/v1/embeddings`, { method: 'POST', headers, body });
        const answer = (await res.json()) as { data?: Array<{ embedding: number[] }> };
        if (res.status !== 200 || answer.data?.length !== 1)
          throw new Error(`gateway answered ${res.status}: ${JSON.stringify(answer).slice(0, 300)}`);
      }
      log(
        `${workload}: ${images.length} images; raw layouts ${layouts.map((l) => `${l.sessions}x${l.threads}-b${l.batch}`).join(', ')}`,
      );
      const lanes: RawLane[] = [];
      for (const layout of layouts) lanes.push(await RawLane.open(vision, layout, pixels, spec.width));
      const gatewayRounds: number[] = [];
      const rawRounds: Record<string, number[]> = Object.fromEntries(lanes.map((l) => [l.name, []]));
      const ratioRounds: number[] = [];
      const p50: number[] = [];
      const p99: number[] = [];
      try {
        for (let r = 0; r < rounds; r++) {
          // The gateway first in even rounds, last in odd ones.
          const measureGateway = async () => {
            const result = await load.run({
              url: gateway.url,
              path: '/v1/embeddings',
              bodies,
              connections: concurrency,
              durationS,
              timeoutS: 120,
              headers,
            });
            if (result.non2xx > 0 || result.errors > 0 || result.error)
              throw new Error(`gateway: ${JSON.stringify(result.statusCodes)} ${result.error ?? ''}`);
            gatewayRounds.push(result.okPerSec);
            p50.push(result.latencyMs.p50);
            p99.push(result.latencyMs.p99);
          };
          if (r % 2 === 0) await measureGateway();
          let best = 0;
          for (const lane of lanes) {
            const rate = await lane.measure(durationS);
            rawRounds[lane.name]!.push(round(rate, 2));
            best = Math.max(best, rate);
          }
          if (r % 2 === 1) await measureGateway();
          ratioRounds.push(gatewayRounds[r]! / best);
          log(
            `  round ${r + 1}: gateway ${gatewayRounds[r]!.toFixed(2)} images/s, raw best ${best.toFixed(2)}: ${(gatewayRounds[r]! / best).toFixed(3)}x`,
          );
        }
      } finally {
        for (const lane of lanes) await lane.close();
      }
      const bestRaw = ratioRounds.map((ratio, r) => gatewayRounds[r]! / ratio);
      points.push({
        workload,
        images: images.length,
        concurrency,
        gateway: round(median(gatewayRounds), 2),
        raw: round(median(bestRaw), 2),
        ratio: round(median(ratioRounds), 3),
        gatewayRounds: gatewayRounds.map((x) => round(x, 2)),
        rawRounds,
        ratioRounds: ratioRounds.map((x) => round(x, 3)),
        gatewayP50Ms: round(median(p50), 1),
        gatewayP99Ms: round(median(p99), 1),
      });
    }
  } finally {
    load.close();
    await gateway.stop();
  }
  const report: ImageEmbeddingReport = {
    when: new Date().toISOString(),
    command: `npx tsx bench/image-embeddings.ts ${process.argv.slice(2).join(' ')}`.trim(),
    machine: machineInfo(),
    model,
    points,
  };
  mkdirSync(RESULTS_DIR, { recursive: true });
  const text = JSON.stringify(report, null, 2) + '\n';
  writeFileSync(join(RESULTS_DIR, `image-embeddings-${report.when.replace(/[:.]/g, '-')}.json`), text);
  writeFileSync(join(RESULTS_DIR, 'image-embeddings-latest.json'), text);
  console.log('| workload | c | gateway images/s | raw ORT images/s (best layout) | gateway / raw |');
  console.log('|---|---|---|---|---|');
  for (const p of points) console.log(`| ${p.workload} | ${p.concurrency} | ${p.gateway} | ${p.raw} | ${p.ratio}x |`);
}

await main();
