/**
 * Image edits bench: seconds per output megapixel and peak memory of each pipeline at 2K and 4K,
 * through the whole server path (base64 in, decode, tiles in the image lane, blend, encode,
 * base64 out), and the latency of embeddings requests while a 4K edit runs (the isolation of the
 * image lane), against the same requests on an idle server.
 *
 *   npx tsx bench/images.ts [--dir ../shared/models/trained] [--pipelines id,...] [--sizes 2048x2048,3840x2160]
 *                           [--repeats 2] [--image-threads N] [--no-isolation]
 *
 * Each (pipeline, size) runs in a fresh child process, so its peak RSS (getrusage maxrss, worker
 * threads included) is its own. Writes results/images-<timestamp>.json, results/images-latest.json
 * and results/images-latest.svg. Needs `npm run build` (workers run dist/) and, for the isolation
 * part, the synthetic embedder in the models dir.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import {
  DEFAULT_EMBED_MODEL,
  RESULTS_DIR,
  SHARED_DIR,
  flagList,
  flagNumber,
  flagString,
  log,
  machineInfo,
  median,
  modelsDir,
  parseFlags,
  percentile,
  round,
  spawnNode,
  type MachineInfo,
} from './lib/common.js';
import { parseServerTiming } from '../src/http/timing.js';

const DEFAULT_PIPELINES = [
  'realesr-animevideov3',
  'espcn-superres-x3-y',
  'isnet-imgly-small',
  'fast-neural-style-candy-nc16',
];
const DEFAULT_SIZES = ['2048x2048', '3840x2160'];

export interface ImageCase {
  pipeline: string;
  size: string;
  input: string;
  /** Median wall time of one edit request, seconds. */
  seconds: number;
  secondsPerOutputMegapixel: number;
  runs: number[];
  /** Median of the server's own split (Server-Timing), ms. */
  decodeMs: number;
  inferenceMs: number;
  encodeMs: number;
  /** Resident memory of the whole process (main thread, workers, sharp): the peak while edits run (sampled every 5 ms), before them, and the peak of start-up (model loading). */
  peakRssMB: number;
  idleRssMB: number;
  startupPeakRssMB: number;
  imageThreads: number;
}

export interface IsolationResult {
  pipeline: string;
  size: string;
  textWorkers: number;
  imageThreads: number;
  idle: { n: number; p50Ms: number; p99Ms: number };
  duringEdit: { n: number; p50Ms: number; p99Ms: number };
  editSeconds: number;
}

export interface ImagesReport {
  kind: 'images';
  startedAt: string;
  machine: MachineInfo;
  cases: ImageCase[];
  isolation?: IsolationResult;
  skipped: string[];
}

/** A synthetic picture: gradient, shapes with hard edges, text, mild noise (so PNG sizes are photo-like). */
async function picture(width: number, height: number): Promise<Buffer> {
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 256 144" preserveAspectRatio="none">
    <defs><linearGradient id="g" x2="1" y2="1"><stop offset="0" stop-color="#204080"/><stop offset="1" stop-color="#f0d0a0"/></linearGradient></defs>
    <rect width="256" height="144" fill="url(#g)"/><circle cx="90" cy="80" r="45" fill="#c03030"/>
    <rect x="150" y="20" width="80" height="50" fill="#30a040"/><text x="12" y="135" font-size="20" fill="white">Sample 42</text></svg>`;
  const { data, info } = await sharp(Buffer.from(svg)).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  let state = 7;
  for (let i = 0; i < data.length; i++) {
    state = (state * 1103515245 + 12345) >>> 0;
    data[i] = Math.max(0, Math.min(255, data[i]! + ((state >>> 28) - 8)));
  }
  return sharp(data, { raw: { width: info.width, height: info.height, channels: 3 } })
    .png({ compressionLevel: 1 })
    .toBuffer();
}

/** The input a pipeline gets for an output size: x4/x3 models start from the size / scale; the others edit an image of the output size. */
function inputSize(pipeline: string, size: string): { width: number; height: number } {
  const [width, height] = size.split('x').map(Number) as [number, number];
  const scale = pipeline.startsWith('realesr') ? 4 : pipeline.startsWith('espcn') ? 3 : 1;
  return { width: Math.round(width / scale), height: Math.round(height / scale) };
}

async function startGateway(imageModels: string[], dir: string, imageThreads: number | undefined) {
  const { loadConfig } = await import('../src/config.js');
  const { createServer } = await import('../src/main.js');
  const config = loadConfig(
    {
      modelsDir: modelsDir(),
      // The embedder serves the isolation run, and counts prompt tokens.
      models: [DEFAULT_EMBED_MODEL],
      imageModels,
      imageModelsDir: dir,
      ...(imageThreads ? { imageIntraOpThreads: imageThreads } : {}),
      port: 0,
      logLevel: 'silent',
    },
    {},
  );
  const server = await createServer(config);
  await server.ready;
  return { server, config };
}

/** Child process: one pipeline at one size. Prints one JSON line. */
async function runCase(
  pipeline: string,
  size: string,
  dir: string,
  repeats: number,
  imageThreads: number | undefined,
): Promise<void> {
  const { server, config } = await startGateway([pipeline], dir, imageThreads);
  const idleRssMB = process.memoryUsage().rss / 2 ** 20;
  const startupPeakRssMB = process.resourceUsage().maxRSS / 1024;
  // Start-up (sessions being optimised) may peak higher than any edit: sample during the edits.
  let peakRss = 0;
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage.rss())), 5);
  const input = inputSize(pipeline, size);
  const image = (await picture(input.width, input.height)).toString('base64');
  const payload = { model: pipeline, prompt: 'bench', image, size, output_format: 'png' };
  const runs: number[] = [];
  const split = { decode: [] as number[], inference: [] as number[], encode: [] as number[] };
  for (let i = 0; i <= repeats; i++) {
    const started = performance.now();
    const response = await server.app.inject({ method: 'POST', url: '/v1/images/edits', payload });
    const seconds = (performance.now() - started) / 1000;
    if (response.statusCode !== 200)
      throw new Error(`${pipeline} ${size}: ${response.statusCode} ${response.body.slice(0, 300)}`);
    if (i === 0) continue; // the first run pays for first-use allocations
    runs.push(seconds);
    const phases = parseServerTiming(response.headers['server-timing'] as string | undefined);
    split.decode.push(phases.decode ?? NaN);
    split.inference.push(phases.inference ?? NaN);
    split.encode.push(phases.encode ?? NaN);
  }
  clearInterval(sampler);
  const [w, h] = size.split('x').map(Number) as [number, number];
  const seconds = median(runs);
  const result: ImageCase = {
    pipeline,
    size,
    input: `${input.width}x${input.height}`,
    seconds: round(seconds, 3),
    secondsPerOutputMegapixel: round(seconds / ((w * h) / 1e6), 3),
    runs: runs.map((r) => round(r, 3)),
    decodeMs: round(median(split.decode), 1),
    inferenceMs: round(median(split.inference), 1),
    encodeMs: round(median(split.encode), 1),
    peakRssMB: round(peakRss / 2 ** 20, 0),
    idleRssMB: round(idleRssMB, 0),
    startupPeakRssMB: round(startupPeakRssMB, 0),
    imageThreads: config.imageIntraOpThreads,
  };
  await server.close();
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
}

/** Child process: embeddings latency idle, then while a 4K edit runs. Prints one JSON line. */
async function runIsolation(pipeline: string, dir: string, imageThreads: number | undefined): Promise<void> {
  const { server, config } = await startGateway([pipeline], dir, imageThreads);
  const base = await server.app.listen({ port: 0, host: '127.0.0.1' });
  const embed = async () => {
    const started = performance.now();
    const response = await fetch(`${base}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: DEFAULT_EMBED_MODEL,
        input: 'how fast is an embedding while an image is upscaled?',
      }),
    });
    await response.arrayBuffer();
    if (response.status !== 200) throw new Error(`embeddings: ${response.status}`);
    return performance.now() - started;
  };
  for (let i = 0; i < 10; i++) await embed();
  const idle: number[] = [];
  for (let i = 0; i < 50; i++) idle.push(await embed());

  const size = '3840x2160';
  const input = inputSize(pipeline, size);
  const image = (await picture(input.width, input.height)).toString('base64');
  let done = false;
  const started = performance.now();
  const editing = fetch(`${base}/v1/images/edits`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: pipeline, prompt: 'bench', image, size }),
  }).then(async (response) => {
    await response.arrayBuffer();
    done = true;
    return response.status;
  });
  while (server.images.active === 0 && !done) await new Promise((r) => setTimeout(r, 5));
  const during: number[] = [];
  while (!done) during.push(await embed());
  const status = await editing;
  if (status !== 200) throw new Error(`edit: ${status}`);
  const editSeconds = (performance.now() - started) / 1000;
  const stats = (xs: number[]) => ({
    n: xs.length,
    p50Ms: round(percentile(xs, 50), 1),
    p99Ms: round(percentile(xs, 99), 1),
  });
  const result: IsolationResult = {
    pipeline,
    size,
    textWorkers: config.workers,
    imageThreads: config.imageIntraOpThreads,
    idle: stats(idle),
    duringEdit: stats(during),
    editSeconds: round(editSeconds, 2),
  };
  await server.close();
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
}

function child<T>(args: string[]): Promise<T> {
  return new Promise((resolvePromise, reject) => {
    const proc = spawnNode(new URL(import.meta.url), args);
    let out = '';
    let err = '';
    proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    proc.on('exit', (code) => {
      const line = out.split('\n').find((l) => l.startsWith('RESULT '));
      if (code === 0 && line) resolvePromise(JSON.parse(line.slice(7)) as T);
      else reject(new Error(`bench child ${args.join(' ')} failed (${code}): ${err.slice(-1500)}`));
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Chart: seconds per output megapixel and peak memory, one bar per pipeline and size.

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

export function renderImagesChart(report: ImagesReport): string {
  const pipelines = [...new Set(report.cases.map((c) => c.pipeline))];
  const sizes = [...new Set(report.cases.map((c) => c.size))];
  const colors = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728'];
  const panelW = 560;
  const panelH = 300;
  const margin = { left: 64, right: 16, top: 40, bottom: 90 };
  const isolationH = report.isolation ? 70 : 0;
  const width = panelW * 2 + 40;
  const height = panelH + isolationH + 60;
  const parts: string[] = [];
  const panel = (x0: number, title: string, unit: string, value: (c: ImageCase) => number) => {
    const max = Math.max(...report.cases.map(value), 1e-9) * 1.15;
    const plotW = panelW - margin.left - margin.right;
    const plotH = panelH - margin.top - margin.bottom;
    const group = plotW / Math.max(1, pipelines.length);
    const bar = (group * 0.7) / Math.max(1, sizes.length);
    parts.push(
      `<text x="${x0 + panelW / 2}" y="${50 + 20}" text-anchor="middle" font-weight="bold">${esc(title)}</text>`,
    );
    const y0 = 50 + margin.top + plotH;
    parts.push(`<line x1="${x0 + margin.left}" y1="${y0}" x2="${x0 + margin.left + plotW}" y2="${y0}" stroke="#333"/>`);
    for (let t = 0; t <= 4; t++) {
      const v = (max * t) / 4;
      const y = y0 - (plotH * t) / 4;
      parts.push(`<line x1="${x0 + margin.left}" y1="${y}" x2="${x0 + margin.left + plotW}" y2="${y}" stroke="#eee"/>`);
      parts.push(
        `<text x="${x0 + margin.left - 6}" y="${y + 4}" text-anchor="end" font-size="11">${v >= 10 ? Math.round(v) : v.toFixed(2)}</text>`,
      );
    }
    parts.push(
      `<text transform="translate(${x0 + 16},${y0 - plotH / 2}) rotate(-90)" text-anchor="middle" font-size="12">${esc(unit)}</text>`,
    );
    pipelines.forEach((pipeline, p) => {
      sizes.forEach((size, s) => {
        const c = report.cases.find((x) => x.pipeline === pipeline && x.size === size);
        if (!c) return;
        const v = value(c);
        const h = (plotH * v) / max;
        const x = x0 + margin.left + p * group + group * 0.15 + s * bar;
        parts.push(
          `<rect x="${x}" y="${y0 - h}" width="${bar - 2}" height="${h}" fill="${colors[s % colors.length]}"><title>${esc(`${pipeline} ${size}: ${v}`)}</title></rect>`,
        );
        parts.push(
          `<text x="${x + bar / 2}" y="${y0 - h - 4}" text-anchor="middle" font-size="10">${v >= 10 ? Math.round(v) : v.toFixed(2)}</text>`,
        );
      });
      parts.push(
        `<text x="${x0 + margin.left + p * group + group / 2}" y="${y0 + 16}" text-anchor="middle" font-size="11">${esc(pipeline.replace(/-nc16$/, ''))}</text>`,
      );
    });
    sizes.forEach((size, s) => {
      parts.push(
        `<rect x="${x0 + margin.left + s * 110}" y="${y0 + 40}" width="12" height="12" fill="${colors[s % colors.length]}"/>`,
      );
      parts.push(`<text x="${x0 + margin.left + s * 110 + 16}" y="${y0 + 50}" font-size="11">${esc(size)}</text>`);
    });
  };
  panel(0, 'Seconds per output megapixel (whole request)', 's / MP', (c) => c.secondsPerOutputMegapixel);
  panel(panelW + 40, 'Peak memory during the edit, above the idle server', 'MB', (c) => c.peakRssMB - c.idleRssMB);
  const m = report.machine;
  parts.push(
    `<text x="10" y="24" font-size="13">onnx-gateway image edits - ${esc(m.cpuModel)}, ${m.cores} cores (load ${m.loadavg[0]}), image threads ${report.cases[0]?.imageThreads ?? '?'}, ORT ${esc(m.onnxruntimeNode)}, ${esc(report.startedAt)}</text>`,
  );
  parts.push(
    `<text x="10" y="42" font-size="11" fill="#555">Whole requests: base64 PNG in, decode, model, resize, PNG encode, base64 out. x4/x3 models start from the output size / scale; the others edit an image of the output size.</text>`,
  );
  if (report.isolation) {
    const i = report.isolation;
    const y = panelH + 80;
    parts.push(
      `<text x="10" y="${y}" font-size="13" font-weight="bold">Isolation: embeddings latency (1 input, ${i.textWorkers} text workers) while a ${i.size} ${esc(i.pipeline)} edit runs (${i.editSeconds} s)</text>`,
    );
    parts.push(
      `<text x="10" y="${y + 22}" font-size="12">idle: p50 ${i.idle.p50Ms} ms, p99 ${i.idle.p99Ms} ms (n ${i.idle.n})   during the edit: p50 ${i.duringEdit.p50Ms} ms, p99 ${i.duringEdit.p99Ms} ms (n ${i.duringEdit.n})</text>`,
    );
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>${parts.join('')}</svg>\n`;
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const flags = parseFlags(process.argv.slice(2));
  const dir = resolve(
    flagString(flags, 'dir', process.env.ONNX_GATEWAY_IMAGE_MODELS_DIR ?? join(SHARED_DIR, 'models', 'trained')),
  );
  const repeats = flagNumber(flags, 'repeats', 2);
  const threads = flags['image-threads'] !== undefined ? flagNumber(flags, 'image-threads', 1) : undefined;
  const threadArgs = threads ? ['--image-threads', String(threads)] : [];

  if (typeof flags.case === 'string') {
    const [pipeline, size] = flags.case.split(':') as [string, string];
    await runCase(pipeline, size, dir, repeats, threads);
    return;
  }
  if (typeof flags.isolation === 'string') {
    await runIsolation(flags.isolation, dir, threads);
    return;
  }

  if (!existsSync(join(modelsDir(), DEFAULT_EMBED_MODEL))) {
    throw new Error(
      `${DEFAULT_EMBED_MODEL} is not in ${modelsDir()}: python3 ../shared/models/synthetic/make_models.py --out .data/models`,
    );
  }
  const report: ImagesReport = {
    kind: 'images',
    startedAt: new Date().toISOString(),
    machine: machineInfo(),
    cases: [],
    skipped: [],
  };
  const pipelines = flagList(flags, 'pipelines', DEFAULT_PIPELINES);
  const sizes = flagList(flags, 'sizes', DEFAULT_SIZES);
  for (const pipeline of pipelines) {
    if (!existsSync(join(dir, pipeline, 'onnx', 'model.onnx'))) {
      report.skipped.push(`${pipeline}: no ${join(dir, pipeline, 'onnx', 'model.onnx')}`);
      log(`skip ${pipeline}: not in ${dir}`);
      continue;
    }
    for (const size of sizes) {
      log(`images: ${pipeline} ${size}`);
      const result = await child<ImageCase>([
        '--case',
        `${pipeline}:${size}`,
        '--dir',
        dir,
        '--repeats',
        String(repeats),
        ...threadArgs,
      ]);
      log(
        `  ${result.seconds} s, ${result.secondsPerOutputMegapixel} s/MP (inference ${result.inferenceMs} ms, encode ${result.encodeMs} ms), peak ${result.peakRssMB} MB (idle ${result.idleRssMB} MB)`,
      );
      report.cases.push(result);
    }
  }
  if (flags['no-isolation'] !== true && existsSync(join(dir, 'realesr-animevideov3', 'onnx', 'model.onnx'))) {
    log('images: isolation (embeddings during a 4K realesr-animevideov3 edit)');
    report.isolation = await child<IsolationResult>([
      '--isolation',
      'realesr-animevideov3',
      '--dir',
      dir,
      ...threadArgs,
    ]);
    const i = report.isolation;
    log(
      `  idle p50 ${i.idle.p50Ms} ms p99 ${i.idle.p99Ms} ms; during edit p50 ${i.duringEdit.p50Ms} ms p99 ${i.duringEdit.p99Ms} ms (n ${i.duringEdit.n}, edit ${i.editSeconds} s)`,
    );
  }

  mkdirSync(RESULTS_DIR, { recursive: true });
  const stamp = report.startedAt.replace(/:/g, '-').replace(/\.\d+Z$/, 'Z');
  const json = `${JSON.stringify(report, null, 2)}\n`;
  writeFileSync(join(RESULTS_DIR, `images-${stamp}.json`), json);
  writeFileSync(join(RESULTS_DIR, 'images-latest.json'), json);
  writeFileSync(join(RESULTS_DIR, 'images-latest.svg'), renderImagesChart(report));
  log(`wrote ${join(RESULTS_DIR, 'images-latest.json')} and images-latest.svg`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((error: unknown) => {
    process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  });
}
