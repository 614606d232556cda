/**
 * The piscina worker: opens one session per served model when the thread starts, warms each up,
 * then runs batches. Knows nothing of queues or requests.
 */
import { workerData } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { Runner } from './runner.js';
import type { BatchResult, BatchTask, ModelReport, WarmTask, WorkerInit } from './protocol.js';

const init = workerData as WorkerInit;
const runners = new Map<string, Runner>();

async function start(): Promise<ModelReport[]> {
  const reports: ModelReport[] = [];
  for (const spec of init.models) {
    const started = performance.now();
    const runner = await Runner.open(spec, init.session);
    reports.push(await runner.warmUp(performance.now() - started));
    runners.set(spec.id, runner);
  }
  return reports;
}

// piscina imports this module when a thread gets its first task; the pool sends each thread a
// warm-up task at start, so models load before the first request.
const ready = start();
ready.catch(() => undefined);

export default async function handle(task: BatchTask | WarmTask): Promise<BatchResult | ModelReport[]> {
  if ('warm' in task) return ready;
  await ready;
  const runner = runners.get(task.model);
  if (!runner) throw new Error(`Model "${task.model}" is not loaded in this worker.`);
  const result = await runner.run(task);
  // Hand the output buffer over to the main thread instead of copying it.
  return Piscina.move({
    [Piscina.transferableSymbol]: [result.output.buffer],
    [Piscina.valueSymbol]: result,
  } as never) as unknown as BatchResult;
}
