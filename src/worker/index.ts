/**
 * A worker thread: opens a session of each model it is given when it starts (a text lane's thread
 * holds one model, an image lane's thread its image models), warms each up and says so, then runs the tasks it is sent one after another. Knows nothing of
 * queues or requests.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { Runner } from './runner.js';
import { VisionRunner } from './vision-runner.js';
import { ImageRunner } from './image-runner.js';
import { isImageTask, type ImageTask, type ImageTaskResult, type ImageWorkerInit } from './image-protocol.js';
import { DeviceLock, noLock } from './device-lock.js';
import { startClaimed } from './claims.js';
import type { ClaimsMessage, CloseMessage, TaskMessage, ThreadMessage } from './messages.js';
import type { BatchResult, BatchTask, ModelReport, WorkerInit } from './protocol.js';

const init = workerData as WorkerInit & ImageWorkerInit;
/** Text models' sessions, and image-text models' vision towers (which take images, not token ids). */
const runners = new Map<string, Runner | VisionRunner>();
/** Image models, opened only in the image lane's threads (which hold no text models). */
const imageRunners = new Map<string, ImageRunner>();
/** Where sessions open, run and are released: in the device's turns, for a device that has them. */
const device = init.deviceLock ? new DeviceLock(init.deviceLock) : noLock;

async function start(): Promise<ModelReport[]> {
  const reports: ModelReport[] = [];
  for (const spec of init.models) {
    const started = performance.now();
    const runner = await device.hold<Runner | VisionRunner>(() =>
      spec.vision ? VisionRunner.open(spec, init.session, init.device) : Runner.open(spec, init.session, init.device),
    );
    runners.set(spec.id, runner);
    reports.push(await device.hold(() => runner.warmUp(performance.now() - started)));
  }
  for (const spec of init.images ?? []) {
    imageRunners.set(
      spec.id,
      await device.hold(() => ImageRunner.open(spec, init.imageSession ?? init.session, init.device)),
    );
  }
  return reports;
}

/** Releases every session before the thread is ended, so that none ends with it mid-way. */
async function release(): Promise<void> {
  for (const runner of [...runners.values(), ...imageRunners.values()]) await device.hold(() => runner.release());
  runners.clear();
  imageRunners.clear();
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
    const transfer = [result.output.buffer, result.counts?.buffer, result.indices?.buffer].filter(
      (b) => b !== undefined,
    ) as ArrayBuffer[];
    post({ id, result }, transfer);
  } catch (error) {
    const failure = error instanceof Error ? error : new Error(String(error));
    post({ id, error: failure.message, name: failure.name });
  }
}

function runBatch(task: BatchTask): Promise<BatchResult> {
  const runner = runners.get(task.model);
  if (!runner) throw new Error(`Model "${task.model}" is not loaded in this worker.`);
  return device.hold(() => runner.run(task));
}

function runImage(task: ImageTask): Promise<ImageTaskResult> {
  const runner = imageRunners.get(task.model);
  if (!runner) throw new Error(`Image model "${task.model}" is not loaded in this worker.`);
  return device.hold(() => runner.run(task));
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
let claims: Int32Array | undefined;
port.on('message', (message: TaskMessage | CloseMessage | ClaimsMessage) => {
  if ('claims' in message) claims = message.claims;
  else if ('close' in message) queue = queue.then(release).then(() => post({ closed: true }));
  else queue = queue.then(() => (startClaimed(claims, message.claim) ? answer(message) : undefined));
});
