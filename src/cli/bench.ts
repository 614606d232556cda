/**
 * The `bench` subcommand: see bench-latency.ts.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { loadConfig } from '../config.js';
import { exitOnStartupError } from './exit.js';
import { startCore } from '../main.js';
import { standinRepos, writeStandins } from './bench-standins.js';
import { coreTarget, formatTable, httpTarget, runBench, toCsv, type BenchPlan } from './bench-latency.js';

interface BenchOptions {
  model?: string;
  standIn?: string;
  task: 'embedding' | 'rerank';
  server?: string;
  apiKey?: string;
  batchSizes: string;
  seqLengths: string;
  requests: string;
  concurrency: string;
  modelsDir?: string;
  workers?: string;
  intraOpThreads?: string;
  device?: string;
  json?: string;
  csv?: string;
}

const numbers = (text: string, name: string) => {
  const values = text.split(',').map((s) => Number(s.trim()));
  if (values.some((n) => !Number.isInteger(n) || n < 1))
    throw new Error(`--${name} takes positive integers separated by commas; got "${text}".`);
  return values;
};

export function registerBenchCommand(program: Command): void {
  program
    .command('bench')
    .description('measure a model: latency percentiles and throughput across batch sizes and sequence lengths')
    .option('--model <id>', 'model to measure (a served id, or a model folder in the models dir)')
    .option(
      '--stand-in <repos>',
      'measure real-size stand-ins of Hub models (random weights, the real architecture): repo ids separated by commas, or "families" for one of each family; written under <models dir>/stand-ins (needs a checkout and python3 with numpy)',
    )
    .option('--task <task>', 'embedding or rerank (batch = documents per query)', 'embedding')
    .option('--server <url>', 'measure a running server over HTTP instead of loading the model here')
    .option('--api-key <key>', 'Bearer key for --server (default: env ONNX_GATEWAY_API_KEY)')
    .option('--batch-sizes <list>', 'inputs per request', '1,8,32')
    .option('--seq-lengths <list>', 'tokens per input, special tokens included', '16,128,512')
    .option('--requests <n>', 'requests per point', '20')
    .option('--concurrency <n>', 'requests in flight at once', '1')
    .option('--models-dir <dir>', 'models dir (env ONNX_GATEWAY_MODELS_DIR)')
    .option('--workers <n>', 'worker threads when loading the model here')
    .option('--intra-op-threads <n>', 'ONNX Runtime threads per worker when loading the model here')
    .option(
      '--device <device>',
      'also measure on this device (webgpu, cuda, cuda:N, coreml, dml), then on the CPU: the same workloads side by side',
    )
    .option('--json <file>', 'write the points as JSON')
    .option('--csv <file>', 'write the points as CSV')
    .action((options: BenchOptions) => bench(options).catch((error: unknown) => exitOnStartupError(error)));
}

async function bench(options: BenchOptions): Promise<void> {
  const plan: BenchPlan = {
    batchSizes: numbers(options.batchSizes, 'batch-sizes'),
    sequenceLengths: numbers(options.seqLengths, 'seq-lengths'),
    requests: numbers(options.requests, 'requests')[0]!,
    concurrency: numbers(options.concurrency, 'concurrency')[0]!,
  };
  if (options.task !== 'embedding' && options.task !== 'rerank') throw new Error('--task is embedding or rerank.');
  if (options.device && options.server)
    throw new Error('--device measures a model loaded here; a server runs on the device it was started with.');
  // The device first, then the CPU, with the same workloads.
  const devices = [
    ...new Set([...(options.device ? [loadConfig({ device: options.device, logLevel: 'silent' }).device] : []), 'cpu']),
  ];
  if (options.csv && devices.length > 1)
    throw new Error("--csv writes one run's points: with --device, use --json (one entry per device).");
  if (options.standIn) {
    if (options.csv)
      throw new Error("--csv writes one model's points: with --stand-in, use --json (one entry per model).");
    const modelsDir = join(loadConfig({ modelsDir: options.modelsDir, logLevel: 'silent' }).modelsDir, 'stand-ins');
    const standins = standinRepos(options.standIn);
    writeStandins(
      standins.map((s) => s.repo),
      modelsDir,
      'real',
    );
    const runs = [];
    for (const { repo, task } of standins) {
      for (const device of devices)
        runs.push(await benchOne({ ...options, model: repo, task: task ?? options.task, modelsDir }, plan, device));
    }
    if (options.json) writeFileSync(options.json, JSON.stringify(runs, null, 2));
    return;
  }
  const runs = [];
  for (const device of devices) runs.push(await benchOne(options, plan, device));
  if (options.json) writeFileSync(options.json, JSON.stringify(runs.length > 1 ? runs : runs[0], null, 2));
  if (options.csv) writeFileSync(options.csv, toCsv(runs[0]!.points));
}

/** Measures one model (loaded here on `device`, or on a server) and prints its table. */
async function benchOne(options: BenchOptions, plan: BenchPlan, device = 'cpu') {
  let close = async () => {};
  let target;
  let model = options.model;
  if (options.server) {
    if (!model) throw new Error('--model is required with --server.');
    target = httpTarget(options.server, model, options.task, options.apiKey ?? process.env.ONNX_GATEWAY_API_KEY);
  } else {
    const config = loadConfig({
      models: model ? [model] : undefined,
      modelsDir: options.modelsDir,
      workers: options.workers,
      intraOpThreads: options.intraOpThreads,
      device,
      logLevel: 'silent',
      maxInputs: Math.max(...plan.batchSizes),
    });
    const started = await startCore(config);
    await started.ready;
    const served = started.registry.list().find((m) => m.task === options.task && (!model || m.id === model));
    if (!served) throw new Error(`No ${options.task} model to measure: name one with --model.`);
    model = served.id;
    target = coreTarget(started.core, served.id, options.task);
    close = () => started.engine.close();
  }
  const where = options.server ? `server ${options.server}` : `in process on ${device}`;
  process.stderr.write(
    `bench: ${model} (${options.task}), ${where}, ${plan.requests} requests per point, concurrency ${plan.concurrency}\n`,
  );
  const points = await runBench(target, plan);
  await close();
  const heading =
    options.standIn || options.device
      ? `\n${model} (${options.task}${options.standIn ? ', real-size stand-in' : ''}, ${device})\n`
      : '';
  process.stdout.write(`${heading}${formatTable(points)}\n`);
  return {
    model,
    task: options.task,
    server: options.server ?? null,
    ...(options.server ? {} : { device }),
    plan,
    points,
  };
}
