/**
 * What the operations need, handed in by whoever composes the server (main.ts, tests).
 */
import type { Config } from '../config.js';
import type { Scheduler } from '../engine/scheduler.js';
import type { Registry } from '../models/registry.js';
import type { EmbeddingCache } from './cache/embedding-cache.js';

export type Limits = Pick<Config, 'maxInputs' | 'maxInputChars' | 'truncate' | 'rerankMaxChunks' | 'rerankChunkOverlap'>;

export interface CoreContext {
  registry: Registry;
  scheduler: Pick<Scheduler, 'submit'>;
  limits: Limits;
  /** Pooled vectors of inputs embedded before (absent: every input is computed). */
  embeddingCache?: EmbeddingCache;
}

/** Where the time of one operation went, for timing headers and metrics. */
export interface Timings {
  tokenizeMs: number;
  queueMs: number;
  inferenceMs: number;
}
