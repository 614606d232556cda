/**
 * The threads that decode and preprocess the images of vision towers' batches
 * (worker/preprocess-thread.ts), one per core, shared by every image-text model. A batch's images
 * go to them side by side, each written into its row of one tensor in shared memory that the
 * tower's session thread then runs as it is. Before, each session thread decoded its own batch one
 * image after another while its intra-op threads waited: on an accelerator, whose model has one
 * session, every image went through one thread (measured on a 16-core machine with a GPU: photos
 * at 25 images/s while the GPU could embed 1,000/s). The threads start as the first vision
 * tower loads and idle without images.
 */
import { availableParallelism } from 'node:os';
import type { VisionLoadSpec } from '../models/registry.js';
import type { PreprocessResult, PreprocessTask } from '../worker/preprocess-thread.js';
import { WorkerPool, workerFile } from './worker-pool.js';

export interface PreprocessedBatch {
  /** rows x 3 x height x width float32 over shared memory; a failed image's row is zeros. */
  pixels: Float32Array;
  /** The rows whose image could not be decoded, with why. */
  rowErrors?: Record<number, string>;
  /** When the batch's preprocessing began (epoch ms) and how long it took. */
  preprocess: { startedAt: number; ms: number };
}

export class ImagePreprocessPool {
  private pool: WorkerPool | undefined;

  constructor(private readonly threads = availableParallelism()) {}

  /** Starts the threads (a vision tower does as it loads, so that its first images do not wait for them). */
  start(): WorkerPool {
    this.pool ??= new WorkerPool({
      file: workerFile('preprocess-thread.js'),
      threads: this.threads,
      // A second image waits in each thread, so that none idles for a round trip between images.
      tasksPerThread: 2,
      workerData: null,
    });
    return this.pool;
  }

  /** Decodes and preprocesses a batch's images; each image's buffer is handed over (it must be the image's alone). */
  async run(images: Uint8Array[], vision: VisionLoadSpec, maxPixels: number): Promise<PreprocessedBatch> {
    const pool = this.start();
    const startedAt = performance.now();
    const per = 3 * vision.height * vision.width;
    const shared = new SharedArrayBuffer(images.length * per * Float32Array.BYTES_PER_ELEMENT);
    const results = await Promise.all(
      images.map((bytes, row) =>
        pool.run<PreprocessResult>(
          {
            bytes,
            processor: vision.processor,
            maxPixels,
            pixels: shared,
            offset: row * per,
          } satisfies PreprocessTask,
          [bytes.buffer as ArrayBuffer],
        ),
      ),
    );
    const rowErrors: Record<number, string> = {};
    results.forEach(({ failure }, row) => {
      if (failure !== undefined) rowErrors[row] = `the image can not be decoded (${failure}).`;
    });
    return {
      pixels: new Float32Array(shared),
      ...(Object.keys(rowErrors).length > 0 ? { rowErrors } : {}),
      // Epoch time, which the worker-reported phases share.
      preprocess: { startedAt: performance.timeOrigin + startedAt, ms: performance.now() - startedAt },
    };
  }

  async close(): Promise<void> {
    await this.pool?.close();
    this.pool = undefined;
  }
}
