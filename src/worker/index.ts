/**
 * A worker thread: opens a session of each model it is given when it starts (a text lane's thread
 * holds one model, an image lane's thread its image models), warms each up and says so, then runs the tasks it is sent one after another. Knows nothing of
 * queues or requests.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { Runner } from './runner.js';
import { ImageRunner } from './image-runner.js';
import { isImageTask, type ImageTask, type ImageTaskResult, type ImageWorkerInit } from './image-protocol.js';
import type { TaskMessage, ThreadMessage } from './messages.js';
import type { BatchResult, BatchTask, ModelReport, WorkerInit } from './protocol.js';

const init = workerData as WorkerInit & ImageWorkerInit;
const runners = new Map<string, Runner>();
/** Image models, opened only in the image lane's threads (which hold no text models). */
const imageRunners = new Map<string, ImageRunner>();

async function start(): Promise<ModelReport[]> {
  const reports: ModelReport[] = [];
  for (const spec of init.models) {
    const started = performance.now();
    const runner = await Runner.open(spec, init.session, init.device);
    reports.push(await runner.warmUp(performance.now() - started));
    runners.set(spec.id, runner);
  }
  for (const spec of init.images ?? []) {
    imageRunners.set(spec.id, await ImageRunner.open(spec, init.imageSession ?? init.session, init.device));
  }
  return reports;
}

const port = parentPort!;
const post = (message: ThreadMessage, transfer: ArrayBuffer[] = []): void => port.postMessage(message, transfer);

/** Runs one task and answers it; results hand their buffers over instead of copying them. */
async function answer({ id, task }: TaskMessage): Promise<void> {
  try {
    if (isImageTask(task)) {
      const result = await runImage(task);
      post({ id, result }, [result.pixels.buffer as ArrayBuffer]);
      return;
    }
    const result = await runBatch(task as BatchTask);
    const transfer = [result.output.buffer, result.counts?.buffer, result.indices?.buffer].filter((b) => b !== undefined) as ArrayBuffer[];
    post({ id, result }, transfer);
  } catch (error) {
    const failure = error instanceof Error ? error : new Error(String(error));
    post({ id, error: failure.message, name: failure.name });
  }
}

function runBatch(task: BatchTask): Promise<BatchResult> {
  const runner = runners.get(task.model);
  if (!runner) throw new Error(`Model "${task.model}" is not loaded in this worker.`);
  return runner.run(task);
}

function runImage(task: ImageTask): Promise<ImageTaskResult> {
  const runner = imageRunners.get(task.model);
  if (!runner) throw new Error(`Image model "${task.model}" is not loaded in this worker.`);
  return runner.run(task);
}

// Tasks run one at a time, in the order they came: a task sent while another runs waits in the
// port and starts as soon as that one has answered.
let queue: Promise<void> = start().then(
  (reports) => post({ ready: reports }),
  (error: unknown) => {
    post({ failed: error instanceof Error ? error.message : String(error) });
    port.close();
  },
);
port.on('message', (message: TaskMessage) => {
  queue = queue.then(() => answer(message));
});
