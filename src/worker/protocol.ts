/**
 * What crosses between the engine and the workers. Plain data and typed arrays only: token ids go
 * in as one Int32Array with per-row lengths, results come back as one Float32Array, both
 * transferred rather than copied.
 */
import type { ModelLoadSpec } from '../models/registry.js';

export interface SessionOptions {
  intraOpThreads: number;
  spinning: boolean;
  memoryArena: boolean;
}

export interface WorkerInit {
  models: ModelLoadSpec[];
  session: SessionOptions;
  /** Options of the second session per model that runs batches marked `solo`; none when absent. */
  soloSession?: SessionOptions;
}

/** Resolves with the worker's model reports once its sessions are open and warm. */
export interface WarmTask {
  warm: true;
}

export interface BatchTask {
  model: string;
  /** Token ids of every row, concatenated, special tokens included, no padding. */
  ids: Int32Array;
  lengths: Int32Array;
  /** Token type ids, concatenated like `ids`; only for pair inputs. */
  typeIds?: Uint8Array;
  /** Nothing else is queued or running: run on the session that has all the cores. */
  solo?: boolean;
}

export interface BatchResult {
  /** rows x width: pooled vectors (embedders) or one logit per row (rerankers). */
  output: Float32Array;
  width: number;
  inferenceMs: number;
}

export interface ModelReport {
  id: string;
  inputs: string[];
  output: string;
  width: number;
  loadMs: number;
}
