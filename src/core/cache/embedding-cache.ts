/**
 * The embedding cache: pooled vectors kept by what determines them, so an input embedded before
 * costs no inference. The key is the model (its id without the variant, the variant, the pooling,
 * the graph output read, and `filesId`, which changes when the model's files do) and a sha256 of
 * the exact token ids fed (after the prompt, truncation and special tokens), or of an image's bytes
 * for an image-text model's vision tower (its own identity): two inputs share an entry only when
 * the model would have seen the same thing. Vectors are kept as the workers return them, before
 * normalisation, a model card's step before a cut and dimension cuts, which stay per request: none
 * of them is part of the key.
 *
 * Two tiers: an LRU in this process bounded by bytes, and optionally Redis shared by replicas
 * (shared-tier.ts). Only the inputs neither tier has go to the engine; hits and computed rows are
 * put back in input order. An input repeated within one request is computed once, and an input
 * that another request is computing at the moment is waited for (and counted as a hit).
 */
import { hash } from 'node:crypto';
import type { Config } from '../../config.js';
import type { JobResult } from '../../engine/scheduler.js';
import type { ServedModel } from '../../models/registry.js';
import { recordSpan, tracer } from '../../tracing/spans.js';
import { VectorLru } from './lru.js';
import { SharedTier, type CacheLog } from './shared-tier.js';

/** What a cached run gives back: the rows of every input, and how many came from the cache. */
export interface CachedJob extends Pick<
  JobResult,
  'output' | 'width' | 'queueMs' | 'loadMs' | 'inferenceMs' | 'preprocessMs'
> {
  /** Inputs served from either tier. */
  hits: number;
}

/** Counts for the metrics, read when they are scraped. */
export interface EmbeddingCacheStats {
  /** Inputs answered in this process without a model run (from its LRU, or computed for another request at the time). */
  hits: number;
  /** Vectors found in Redis. */
  sharedHits: number;
  /** Inputs computed (an input repeated within a request counts once). */
  misses: number;
  evictions: number;
  bytes: number;
  entries: number;
  /** Redis commands that failed (the inputs were computed). */
  sharedErrors: number;
}

/** What the model is fed per input: token ids, or an image's encoded bytes (a vision tower's). */
type Input = Int32Array | Uint8Array;
type Compute<T extends Input> = (inputs: T[]) => Promise<JobResult>;

export class EmbeddingCache {
  private readonly local: VectorLru | undefined;
  private readonly tags = new WeakMap<ServedModel, string>();
  /** Rows being computed for some request, by key: undefined when that request fails. */
  private readonly pending = new Map<string, Promise<Float32Array | undefined>>();
  private hits = 0;
  private misses = 0;

  /** `maxBytes` 0 keeps no local tier; `shared` adds the Redis one. */
  constructor(
    maxBytes: number,
    private readonly shared?: SharedTier,
  ) {
    this.local = maxBytes > 0 ? new VectorLru(maxBytes) : undefined;
  }

  /** The cache key of one input of `model`: its token ids, or an image's bytes. */
  keyOf(model: ServedModel, ids: Input): string {
    return `${this.tagOf(model)}:${hash('sha256', ids, 'base64')}`;
  }

  /** The rows of `sequences` for `model`: from the cache where it has them, from `compute` for the rest. */
  async run<T extends Input>(model: ServedModel, sequences: T[], compute: Compute<T>): Promise<CachedJob> {
    const started = tracer ? performance.now() : 0;
    const width = model.dimensions;
    const count = sequences.length;
    const keys = sequences.map((ids) => this.keyOf(model, ids));
    const rows = new Array<Float32Array | undefined>(count);
    // The first index of each key still missing, and where its repeats are.
    const missing = new Map<string, number[]>();
    for (let i = 0; i < count; i++) {
      const key = keys[i]!;
      const row = this.local?.get(key);
      if (row !== undefined) rows[i] = row;
      else {
        const repeats = missing.get(key);
        if (repeats) repeats.push(i);
        else missing.set(key, [i]);
      }
    }
    let hits = count - [...missing.values()].reduce((sum, indices) => sum + indices.length, 0);
    this.hits += hits;

    if (this.shared && missing.size > 0) {
      const wanted = [...missing.keys()];
      const found = await this.shared.get(wanted, width);
      found.forEach((row, j) => {
        if (row === undefined) return;
        const key = wanted[j]!;
        this.local?.set(key, row);
        for (const i of missing.get(key)!) rows[i] = row;
        hits += missing.get(key)!.length;
        missing.delete(key);
      });
    }

    if (tracer)
      recordSpan(tracer, 'cache lookup', started, performance.now(), {
        'onnx_gateway.inputs': count,
        'onnx_gateway.cache.hits': hits,
        'onnx_gateway.cache.shared': this.shared !== undefined,
      });

    const timings = { queueMs: 0, loadMs: 0, inferenceMs: 0, preprocessMs: 0 };
    if (missing.size > 0) {
      // Inputs another request is computing right now are waited for, not computed twice.
      const awaited = [...missing.keys()].filter((key) => this.pending.has(key));
      const waits = awaited.map((key) => this.pending.get(key)!);
      const own = [...missing.keys()].filter((key) => !this.pending.has(key));
      const [, shared] = await Promise.all([
        this.computeRows(own, missing, sequences, rows, width, compute, timings),
        Promise.all(waits),
      ]);
      awaited.forEach((key, j) => {
        const row = shared[j];
        if (row === undefined) return;
        for (const i of missing.get(key)!) rows[i] = row;
        hits += missing.get(key)!.length;
        this.hits += missing.get(key)!.length;
      });
      // The request that was computing them failed or was cancelled: compute them here.
      const failed = awaited.filter((_, j) => shared[j] === undefined);
      await this.computeRows(failed, missing, sequences, rows, width, compute, timings);
    }

    const output = new Float32Array(count * width);
    for (let i = 0; i < count; i++) output.set(rows[i]!, i * width);
    return {
      output,
      width,
      queueMs: timings.queueMs,
      loadMs: timings.loadMs,
      inferenceMs: timings.inferenceMs,
      ...(timings.preprocessMs > 0 ? { preprocessMs: timings.preprocessMs } : {}),
      hits,
    };
  }

  /**
   * Computes the inputs under `keys` (the first of each key's indices), puts their rows in `rows` at
   * every index of the key, and stores them. Until they are back, other requests find them pending;
   * registered before the first await, so that a request arriving meanwhile waits for them.
   */
  private async computeRows<T extends Input>(
    keys: string[],
    missing: Map<string, number[]>,
    sequences: T[],
    rows: (Float32Array | undefined)[],
    width: number,
    compute: Compute<T>,
    timings: { queueMs: number; loadMs: number; inferenceMs: number; preprocessMs: number },
  ): Promise<void> {
    if (keys.length === 0) return;
    this.misses += keys.length;
    const settle = new Map<string, (row: Float32Array | undefined) => void>();
    for (const key of keys) this.pending.set(key, new Promise((resolve) => settle.set(key, resolve)));
    const stored: [string, Float32Array][] = [];
    try {
      const job = await compute(keys.map((key) => sequences[missing.get(key)![0]!]!));
      timings.queueMs = Math.max(timings.queueMs, job.queueMs);
      timings.loadMs = Math.max(timings.loadMs, job.loadMs);
      timings.inferenceMs += job.inferenceMs;
      timings.preprocessMs += job.preprocessMs ?? 0;
      keys.forEach((key, j) => {
        // A copy: the answer is normalised in place, the cached row must stay as pooled.
        const row = job.output.slice(j * width, (j + 1) * width);
        for (const i of missing.get(key)!) rows[i] = row;
        stored.push([key, row]);
      });
      this.keep(stored);
    } finally {
      for (const key of keys) {
        this.pending.delete(key);
        settle.get(key)!(rows[missing.get(key)![0]!]);
      }
    }
  }

  stats(): EmbeddingCacheStats {
    return {
      hits: this.hits,
      sharedHits: this.shared?.hits ?? 0,
      misses: this.misses,
      evictions: this.local?.evictions ?? 0,
      bytes: this.local?.bytes ?? 0,
      entries: this.local?.size ?? 0,
      sharedErrors: this.shared?.errors ?? 0,
    };
  }

  async close(): Promise<void> {
    this.local?.clear();
    await this.shared?.close();
  }

  private keep(entries: [string, Float32Array][]): void {
    if (this.local) for (const [key, row] of entries) this.local.set(key, row);
    void this.shared?.set(entries);
  }

  /** A short digest of everything about the model that decides its vectors, computed once per model. */
  private tagOf(model: ServedModel): string {
    let tag = this.tags.get(model);
    if (tag === undefined) {
      const identity = JSON.stringify([model.baseId, model.variant, model.pooling, model.output, model.filesId]);
      tag = hash('sha256', identity, 'base64url').slice(0, 22);
      this.tags.set(model, tag);
    }
    return tag;
  }
}

/** The cache the settings ask for: none when both tiers are off. */
export function createEmbeddingCache(
  config: Pick<Config, 'cacheMaxMb' | 'cacheShared' | 'cacheTtl' | 'redisUrl'>,
  log: CacheLog,
): EmbeddingCache | undefined {
  const shared =
    config.cacheShared && config.redisUrl ? new SharedTier(config.redisUrl, config.cacheTtl, log) : undefined;
  if (config.cacheMaxMb === 0 && !shared) return undefined;
  return new EmbeddingCache(config.cacheMaxMb * 1024 * 1024, shared);
}
