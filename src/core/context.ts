/**
 * What the operations need, handed in by whoever composes the server (main.ts, tests).
 */
import type { Config } from '../config.js';
import type { ModelState } from '../engine/engine.js';
import type { Scheduler } from '../engine/scheduler.js';
import type { Registry } from '../models/registry.js';
import type { EmbeddingCache } from './cache/embedding-cache.js';

export type Limits = Pick<
  Config,
  'maxInputs' | 'maxInputChars' | 'truncate' | 'rerankMaxChunks' | 'rerankChunkOverlap'
> &
  /**
   * Bounds on an image to embed, and what embeddings do with long inputs (absent: the settings'
   * defaults; long inputs as truncate says).
   */
  Partial<Pick<Config, 'embeddingImageMaxBytes' | 'imageMaxPixels' | 'longInputs' | 'maxInputTokens'>>;

export interface CoreContext {
  registry: Registry;
  scheduler: Pick<Scheduler, 'submit'>;
  limits: Limits;
  /** Pooled vectors of inputs embedded before (absent: every input is computed). */
  embeddingCache?: EmbeddingCache;
  /** Which text models are loaded, and loading or unloading them (absent: all are, for good). */
  lifecycle?: ModelLifecycle;
}

export type { ModelState } from '../engine/engine.js';

/** The text models' lifecycle (the engine's): what the API shows of it and what admins drive. */
export interface ModelLifecycle {
  state(model: string): ModelState | undefined;
  load(model: string): Promise<void>;
  unload(model: string): Promise<void>;
  /** How long the model stays loaded once idle: negative for ever, 0 unloads it when idle. */
  keepAlive(model: string, ms: number): void;
}

/** Where the time of one operation went, for what http/ reports of it (timings, metrics). */
export interface Timings {
  tokenizeMs: number;
  queueMs: number;
  /** Of the queue's wait, how long the model was loading (0 when it was loaded). */
  loadMs: number;
  inferenceMs: number;
  /** An image's decoding and preprocessing in the vision tower's worker (absent: no image). */
  preprocessMs?: number;
}
