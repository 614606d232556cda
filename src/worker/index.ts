/**
 * The piscina worker: opens one session per served model when the thread starts (two when solo
 * runs are on), warms each up, then runs batches. Knows nothing of queues or requests.
 */
import { workerData } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { Runner } from './runner.js';
import { ImageRunner } from './image-runner.js';
import { isImageTask, type ImageTask, type ImageTaskResult, type ImageWorkerInit } from './image-protocol.js';
import type { BatchResult, BatchTask, ModelReport, WarmTask, WorkerInit } from './protocol.js';

const init = workerData as WorkerInit & ImageWorkerInit;
const runners = new Map<string, Runner>();
/** Sessions with all the cores, for batches that run alone on the server (see soloThreads). */
const soloRunners = new Map<string, Runner>();
/** Image models, opened only in the image lane's threads (which hold no text models). */
const imageRunners = new Map<string, ImageRunner>();

async function start(): Promise<ModelReport[]> {
  const reports: ModelReport[] = [];
  for (const spec of init.models) {
    const started = performance.now();
    const runner = await Runner.open(spec, init.session);
    reports.push(await runner.warmUp(performance.now() - started));
    runners.set(spec.id, runner);
    if (init.soloSession) {
      const solo = await Runner.open(spec, init.soloSession);
      await solo.warmUp(0);
      soloRunners.set(spec.id, solo);
    }
  }
  for (const spec of init.images ?? []) {
    imageRunners.set(spec.id, await ImageRunner.open(spec, init.imageSession ?? init.session));
  }
  return reports;
}

// piscina imports this module when a thread gets its first task; the pool sends each thread a
// warm-up task at start, so models load before the first request.
const ready = start();
ready.catch(() => undefined);

export default async function handle(task: BatchTask | WarmTask | ImageTask): Promise<BatchResult | ModelReport[] | ImageTaskResult> {
  if ('warm' in task) return ready;
  await ready;
  if (isImageTask(task)) return runImage(task);
  const runner = (task.solo && soloRunners.get(task.model)) || runners.get(task.model);
  if (!runner) throw new Error(`Model "${task.model}" is not loaded in this worker.`);
  const result = await runner.run(task);
  // Hand the output buffer over to the main thread instead of copying it.
  return Piscina.move({
    [Piscina.transferableSymbol]: [result.output.buffer, ...(result.counts ? [result.counts.buffer] : []), ...(result.indices ? [result.indices.buffer] : [])],
    [Piscina.valueSymbol]: result,
  } as never) as unknown as BatchResult;
}

async function runImage(task: ImageTask): Promise<ImageTaskResult> {
  const runner = imageRunners.get(task.model);
  if (!runner) throw new Error(`Image model "${task.model}" is not loaded in this worker.`);
  const result = await runner.run(task);
  return Piscina.move({
    [Piscina.transferableSymbol]: [result.pixels.buffer],
    [Piscina.valueSymbol]: result,
  } as never) as unknown as ImageTaskResult;
}
