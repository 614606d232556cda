/**
 * What crosses between the engine and the workers. Plain data and typed arrays only: token ids go
 * in as one Int32Array with per-row lengths, results come back as typed arrays, both transferred
 * rather than copied. A dense result is one Float32Array of rows x width; sparse vectors and token
 * vectors have rows of their own lengths, so they come back concatenated with a count per row.
 */
import type { OutputKind } from '../models/heads.js';
import type { ModelLoadSpec } from '../models/registry.js';

export type { OutputKind } from '../models/heads.js';

export interface SessionOptions {
  intraOpThreads: number;
  spinning: boolean;
  /**
   * With spinning: the threads stop spinning as soon as a run ends (they still spin within it),
   * so that between runs they leave the cores to the main thread and the clients.
   */
  stopSpinningAfterRun?: boolean;
  memoryArena: boolean;
}

export interface WorkerInit {
  /** The models this thread opens a session of (a text lane's thread: one). */
  models: ModelLoadSpec[];
  session: SessionOptions;
  /** Where the sessions run (placement.ts); `cpu` when absent. */
  device?: string;
  /** The device's turn, shared by every thread of the process on it, for a device whose sessions take turns (devices.ts). */
  deviceLock?: SharedArrayBuffer;
}

export interface BatchTask {
  model: string;
  /** Token ids of every row, concatenated, special tokens included, no padding. */
  ids: Int32Array;
  lengths: Int32Array;
  /** Token type ids, concatenated like `ids`; only for pair inputs. */
  typeIds?: Uint8Array;
  /** Nothing else is queued or running: run on the model's solo session, which has all the cores. */
  solo?: boolean;
  /** What to give back (absent: dense). A batch holds one kind only. */
  kind?: OutputKind;
  /**
   * Per row, how many leading tokens the attention mask covers (absent: all of them): a ColBERT
   * query's [MASK] expansion is not attended, yet its token vectors are given back.
   */
  attended?: Int32Array;
  /**
   * A vision tower's batch as the scheduler hands it to the lane: each row's encoded image (PNG,
   * JPEG, WebP); `ids` is then empty and `lengths` holds each image's tokens. The lane has them
   * decoded and preprocessed (engine/image-preprocess-pool.ts) and sends the worker `pixels` instead.
   */
  images?: Uint8Array[];
  /** A vision tower's batch as its worker runs it: pixel_values, rows x 3 x height x width, in shared memory. */
  pixels?: Float32Array;
}

export interface BatchResult {
  /**
   * dense: rows x width, pooled vectors (embedders) or one logit per row (rerankers);
   * sparse: the nonzero weights of every row, concatenated (their vocabulary ids in `indices`);
   * tokens: every row's token vectors (counts[r] x width), concatenated.
   */
  output: Float32Array;
  width: number;
  /** sparse and tokens: entries (nonzero weights, token vectors) per row. */
  counts?: Int32Array;
  /** sparse: the vocabulary id of each weight in `output`, ascending within a row. */
  indices?: Int32Array;
  /** A vision tower's rows whose image could not be decoded, by row, with why (their output rows are zeros). */
  rowErrors?: Record<number, string>;
  inferenceMs: number;
  /** A vision tower's decoding and preprocessing of the batch's images (set by the lane): when it began (epoch ms) and how long it took. */
  preprocess?: { startedAt: number; ms: number };
}

export interface ModelReport {
  id: string;
  inputs: string[];
  output: string;
  width: number;
  loadMs: number;
}
