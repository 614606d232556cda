/**
 * The worker pool: piscina threads that each hold one ONNX session per served model. Batches go in
 * with their typed arrays transferred; readiness is tracked from the workers' announcements.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { StartupError } from '../errors.js';
import type { ModelLoadSpec } from '../models/registry.js';
import type { BatchResult, BatchTask, ModelReport, SessionOptions, WarmTask, WorkerInit } from '../worker/protocol.js';

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
  private readonly piscina: Piscina;
  private warm = false;
  /** Resolves once every worker has opened and warmed every model; rejects if one fails. */
  readonly ready: Promise<ModelReport[]>;
  /** Worker threads started after the first set (crashed and replaced). */
  restarts = 0;
  private created = 0;

  constructor(readonly options: PoolOptions) {
    this.piscina = new Piscina({
      filename: workerFile(),
      minThreads: options.workers,
      maxThreads: options.workers,
      idleTimeout: Number.MAX_SAFE_INTEGER,
      concurrentTasksPerWorker: 1,
      workerData: { models: options.models, session: options.session, soloSession: options.soloSession } satisfies WorkerInit,
    });
    // One warm-up task per thread, all at once: a thread runs one task at a time and each waits
    // for its thread's models, so every thread gets exactly one and loads its sessions now.
    const warmUps = Array.from({ length: options.workers }, () => this.piscina.run({ warm: true } satisfies WarmTask) as Promise<ModelReport[]>);
    this.ready = Promise.all(warmUps).then(
      (reports) => {
        this.warm = true;
        return reports[0]!;
      },
      (error: Error) => {
        throw new WorkerStartError(error.message);
      },
    );
    this.ready.catch(() => undefined);
    this.piscina.on('workerCreate', () => {
      this.created += 1;
      if (this.created > options.workers) this.restarts += 1;
    });
    // A worker that dies is replaced by piscina; its task is rejected and retried by the scheduler.
    this.piscina.on('error', () => undefined);
  }

  get isReady(): boolean {
    return this.warm;
  }

  get threads(): number {
    return this.options.workers;
  }

  run(task: BatchTask): Promise<BatchResult> {
    const transferList: ArrayBuffer[] = [task.ids.buffer as ArrayBuffer, task.lengths.buffer as ArrayBuffer];
    if (task.typeIds) transferList.push(task.typeIds.buffer as ArrayBuffer);
    if (task.attended) transferList.push(task.attended.buffer as ArrayBuffer);
    return this.piscina.run(task, { transferList });
  }

  async close(): Promise<void> {
    // Ending a thread while ONNX Runtime is inside a run (the warm-up included) aborts the whole
    // process, so let the warm-up finish, or fail, first.
    await this.ready.catch(() => undefined);
    await this.piscina.close({ force: false });
  }
}
