/**
 * The piscina worker: opens one session per served model when the thread starts, warms each up,
 * announces itself on the ready channel, then runs batches. Knows nothing of queues or requests.
 */
import { BroadcastChannel, threadId, workerData } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { Runner } from './runner.js';
import type { BatchResult, BatchTask, ModelReport, ReadyMessage, WorkerInit } from './protocol.js';

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

const ready = start();
const channel = new BroadcastChannel(init.readyChannel);
ready.then(
  (models) => channel.postMessage({ threadId, ok: true, models } satisfies ReadyMessage),
  (error: Error) => channel.postMessage({ threadId, ok: false, error: error.message } satisfies ReadyMessage),
).finally(() => channel.close());
// A failed start is reported on the channel; keep the rejection from crashing the thread.
ready.catch(() => undefined);

export default async function runBatch(task: BatchTask): Promise<BatchResult> {
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
