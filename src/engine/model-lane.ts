/**
 * One model's sessions, as its placement says: `sessions` worker threads that each hold one session
 * of the model with `threadsPerSession` intra-op threads, and at most one more thread with the solo
 * session (all the cores) for a batch that runs alone on the server. Batches go in with their typed
 * arrays transferred. A lane opens with one session (the one its size is measured by) and grows to
 * its placement.
 */
import { settings } from '../config.js';
import type { ModelLoadSpec } from '../models/registry.js';
import type { BatchResult, BatchTask, ModelReport, SessionOptions, WorkerInit } from '../worker/protocol.js';
import { deviceLock } from './devices.js';
import type { ImagePreprocessPool } from './image-preprocess-pool.js';
import type { Placement } from './placement.js';
import { WorkerPool, WorkerStartError, workerFile } from './worker-pool.js';

/** Settings every session of the lane shares. */
export interface LaneSessionDefaults {
  spinning: boolean;
  memoryArena: boolean;
  /** A vision tower's bound on a decoded image's pixels (the imageMaxPixels setting), checked again when decoding. */
  imageMaxPixels?: number;
  /** Where a vision tower's images are decoded and preprocessed, before its session runs them. */
  preprocess?: ImagePreprocessPool;
}

export class ModelLane {
  private readonly sessions: WorkerPool<ModelReport[]>;
  private solo: WorkerPool<ModelReport[]> | undefined;
  private sessionCount: number;
  /** The warm-up report of the first session: inputs, output, width. */
  readonly report: Promise<ModelReport>;

  /** Opens the lane's first session with `threadsPerSession` threads. */
  constructor(
    readonly spec: ModelLoadSpec,
    readonly device: string,
    readonly threadsPerSession: number,
    private readonly defaults: LaneSessionDefaults,
  ) {
    this.sessionCount = 1;
    this.sessions = this.openPool(1, {
      intraOpThreads: threadsPerSession,
      spinning: defaults.spinning,
      memoryArena: defaults.memoryArena,
    });
    this.report = this.sessions.ready.then(
      (reports) => reports[0]![0]!,
      (error: Error) => {
        throw new WorkerStartError(error.message);
      },
    );
    this.report.catch(() => undefined);
    if (spec.vision) defaults.preprocess?.start();
  }

  /** Opens the sessions and the solo session the placement adds to the first one. */
  async grow(placement: Placement): Promise<void> {
    if (placement.threadsPerSession !== this.threadsPerSession)
      throw new Error('A lane grows with sessions of its own thread count.');
    const more = placement.sessions - this.sessionCount;
    const opening: Promise<unknown>[] = [];
    if (more > 0) opening.push(this.sessions.grow(more));
    if (placement.soloThreads > 0 && !this.solo) {
      // Its threads spin within a run (a short input's many small operators start at once), and
      // stop when the run ends: spinning on after it, for tens of ms, they took every core from
      // the main thread's answer and the client's next request (docs/performance.md).
      this.solo = this.openPool(1, {
        intraOpThreads: placement.soloThreads,
        spinning: true,
        stopSpinningAfterRun: true,
        memoryArena: this.defaults.memoryArena,
      });
      opening.push(this.solo.ready);
    }
    this.sessionCount = Math.max(this.sessionCount, placement.sessions);
    try {
      await Promise.all(opening);
    } catch (error) {
      throw new WorkerStartError((error as Error).message);
    }
  }

  get sessionsOpen(): number {
    return this.sessionCount;
  }

  get hasSolo(): boolean {
    return this.solo !== undefined;
  }

  /** Threads started to replace threads that died. */
  get restarts(): number {
    return this.sessions.restarts + (this.solo?.restarts ?? 0);
  }

  /** A worker that dies fails its batches (the scheduler retries them once) and is replaced. */
  run(task: BatchTask): Promise<BatchResult> {
    if (task.images) return this.runImages(task, task.images);
    const transfer: ArrayBuffer[] = [task.ids.buffer as ArrayBuffer, task.lengths.buffer as ArrayBuffer];
    if (task.typeIds) transfer.push(task.typeIds.buffer as ArrayBuffer);
    if (task.attended) transfer.push(task.attended.buffer as ArrayBuffer);
    const pool = task.solo && this.solo ? this.solo : this.sessions;
    return pool.run<BatchResult>(task, transfer);
  }

  /**
   * A vision tower's batch: its images decoded and preprocessed side by side on the preprocessing
   * threads, then the tower run on their pixel values. An image that can not be decoded leaves its
   * row zero and is reported by row, so that it fails its own request and never its neighbours'.
   */
  private async runImages(task: BatchTask, images: Uint8Array[]): Promise<BatchResult> {
    const vision = this.spec.vision;
    if (!vision || !this.defaults.preprocess) throw new Error(`Model "${this.spec.id}" does not take images.`);
    const maxPixels = this.defaults.imageMaxPixels ?? settings.imageMaxPixels.default!;
    const { pixels, rowErrors, preprocess } = await this.defaults.preprocess.run(images, vision, maxPixels);
    const failedRows = rowErrors ? Object.keys(rowErrors).length : 0;
    if (failedRows === images.length)
      return { output: new Float32Array(0), width: 0, rowErrors, inferenceMs: 0, preprocess };
    const { images: _sent, ...rest } = task;
    const pool = task.solo && this.solo ? this.solo : this.sessions;
    const result = await pool.run<BatchResult>({ ...rest, pixels }, [
      task.ids.buffer as ArrayBuffer,
      task.lengths.buffer as ArrayBuffer,
    ]);
    return { ...result, preprocess, ...(rowErrors ? { rowErrors } : {}) };
  }

  /** Lets held batches finish, then ends the threads (and frees the sessions). */
  async close(): Promise<void> {
    await Promise.all([this.sessions.close(), this.solo?.close()]);
  }

  private openPool(threads: number, session: SessionOptions): WorkerPool<ModelReport[]> {
    return new WorkerPool<ModelReport[]>({
      file: workerFile(),
      threads,
      // A second batch waits in each thread, so a thread never idles for a round trip between
      // batches; a thread that runs dry takes over one that has not started elsewhere.
      tasksPerThread: 2,
      rebalance: true,
      workerData: {
        models: [loadSpec(this.spec)],
        session,
        device: this.device,
        deviceLock: deviceLock(this.device),
      } satisfies WorkerInit,
    });
  }
}

/** The plain-data part of a model that crosses into a worker thread. */
function loadSpec({
  id,
  task,
  onnxPath,
  pooling,
  padId,
  output,
  heads,
  specialIds,
  feeds,
  vision,
  fillerId,
  externalDataDir,
}: ModelLoadSpec): ModelLoadSpec {
  return {
    id,
    task,
    onnxPath,
    pooling,
    padId,
    output,
    heads,
    specialIds,
    feeds,
    vision,
    fillerId,
    externalDataDir,
  };
}
