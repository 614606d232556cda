/**
 * The image lane: a worker pool of its own for image models, beside the text pool. Its threads
 * hold only image sessions and its thread budget is separate, so a long image edit queues behind
 * other image work and never takes a text worker: embeddings and rerank keep their own threads.
 */
import { ApiError } from '../errors.js';
import type { ImageModelSpec } from '../models/image-catalogue.js';
import type { ImageTask, ImageTaskResult, ImageWorkerInit } from '../worker/image-protocol.js';
import type { SessionOptions, WorkerInit } from '../worker/protocol.js';
import { deviceLock } from './devices.js';
import { WorkerPool, WorkerStartError, workerFile } from './worker-pool.js';

export interface ImageLaneOptions {
  /** Where the image sessions run: `cpu` or an accelerator (devices.ts). */
  device: string;
  workers: number;
  models: ImageModelSpec[];
  session: SessionOptions;
  /** Tasks waiting for a thread before new work is refused with `overloaded`. */
  queueCapacity: number;
}

/** Runs one image task at a time per thread; what images/ needs of the lane. */
export interface ImageTaskRunner {
  /** Worker threads, each holding a session of every image pipeline. */
  readonly threads: number;
  /** ONNX Runtime intra-op threads of each of those sessions. */
  readonly threadsPerSession: number;
  /** `cpu` or the accelerator the sessions run on. */
  readonly device: string;
  run(task: ImageTask): Promise<ImageTaskResult>;
}

export class ImageLane implements ImageTaskRunner {
  private readonly workers: WorkerPool | undefined;
  private warm = false;
  private pending = 0;
  /** Resolves once every image thread has opened every image model; rejects if one can not. */
  readonly ready: Promise<void>;

  constructor(readonly options: ImageLaneOptions) {
    // No image models, no threads: the lane then costs nothing.
    if (options.models.length === 0) {
      this.workers = undefined;
      this.warm = true;
      this.ready = Promise.resolve();
      return;
    }
    const workerData: WorkerInit & ImageWorkerInit = {
      models: [],
      session: options.session,
      images: options.models,
      imageSession: options.session,
      device: options.device,
      deviceLock: deviceLock(options.device),
    };
    // One tile per thread at a time: a waiting tile goes to whichever thread frees first.
    this.workers = new WorkerPool({ file: workerFile(), threads: options.workers, tasksPerThread: 1, workerData });
    this.ready = this.workers.ready.then(
      () => {
        this.warm = true;
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

  get threadsPerSession(): number {
    return this.options.session.intraOpThreads;
  }

  get device(): string {
    return this.options.device;
  }

  /** Tasks handed to the lane and not yet finished (running or waiting for a thread). */
  get active(): number {
    return this.pending;
  }

  async run(task: ImageTask): Promise<ImageTaskResult> {
    if (!this.workers) throw new ApiError('model_not_found', `The image model "${task.model}" is not served here.`);
    if (this.workers.queueSize >= this.options.queueCapacity) {
      throw new ApiError(
        'overloaded',
        `The image lane is full (${this.workers.queueSize} tiles waiting); retry later.`,
        { retryAfterSeconds: 5 },
      );
    }
    this.pending += 1;
    try {
      return await this.workers.run<ImageTaskResult>(task, [task.pixels.buffer as ArrayBuffer]);
    } finally {
      this.pending -= 1;
    }
  }

  async close(): Promise<void> {
    await this.workers?.close();
  }
}
