/**
 * The text lane's workers: threads that each hold one ONNX session per served model. Batches go in
 * with their typed arrays transferred; readiness is tracked from the workers' announcements.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { StartupError } from '../errors.js';
import type { ModelLoadSpec } from '../models/registry.js';
import type { BatchResult, BatchTask, ModelReport, SessionOptions, WorkerInit } from '../worker/protocol.js';
import { WorkerPool } from './worker-pool.js';

/**
 * The worker's JavaScript file. Built code finds it beside itself; when the sources run as
 * TypeScript (the test runner), workers still run the built JavaScript, which `npm test` builds first.
 */
export function workerFile(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const beside = join(here, '..', 'worker', 'index.js');
  if (existsSync(beside)) return beside;
  const built = join(here, '..', '..', 'dist', 'worker', 'index.js');
  if (existsSync(built)) return built;
  throw new Error(`The worker script is missing (${built}): run "npm run build" first.`);
}

export interface PoolOptions {
  workers: number;
  models: ModelLoadSpec[];
  session: SessionOptions;
  soloSession?: SessionOptions;
}

export class WorkerStartError extends StartupError {
  override name = 'WorkerStartError';
  readonly code = 'worker_start';
}

export class Pool {
  private readonly workers: WorkerPool<ModelReport[]>;
  private warm = false;
  /** Resolves once every worker has opened and warmed every model; rejects if one fails. */
  readonly ready: Promise<ModelReport[]>;

  constructor(readonly options: PoolOptions) {
    this.workers = new WorkerPool<ModelReport[]>({
      file: workerFile(),
      threads: options.workers,
      // A second batch waits in each thread, so a thread never idles for a round trip between batches.
      tasksPerThread: 2,
      workerData: { models: options.models, session: options.session, soloSession: options.soloSession } satisfies WorkerInit,
    });
    this.ready = this.workers.ready.then(
      (reports) => {
        this.warm = true;
        return reports[0]!;
      },
      (error: Error) => {
        throw new WorkerStartError(error.message);
      },
    );
    this.ready.catch(() => undefined);
  }

  get isReady(): boolean {
    return this.warm;
  }

  get threads(): number {
    return this.options.workers;
  }

  /** Worker threads started to replace threads that died. */
  get restarts(): number {
    return this.workers.restarts;
  }

  /** A worker that dies fails its batches (the scheduler retries them once) and is replaced. */
  run(task: BatchTask): Promise<BatchResult> {
    const transfer: ArrayBuffer[] = [task.ids.buffer as ArrayBuffer, task.lengths.buffer as ArrayBuffer];
    if (task.typeIds) transfer.push(task.typeIds.buffer as ArrayBuffer);
    if (task.attended) transfer.push(task.attended.buffer as ArrayBuffer);
    return this.workers.run<BatchResult>(task, transfer);
  }

  close(): Promise<void> {
    return this.workers.close();
  }
}
