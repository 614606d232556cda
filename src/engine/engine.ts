/**
 * The engine: the worker pool and the scheduler in front of it, started together and closed
 * together. Knows models only as ids with load specs, never as operations.
 */
import type { Config } from '../config.js';
import type { ServedModel } from '../models/registry.js';
import type { ModelReport } from '../worker/protocol.js';
import { Pool } from './pool.js';
import { Scheduler, type BatchObserver } from './scheduler.js';

export class Engine {
  readonly pool: Pool;
  readonly scheduler: Scheduler;
  /** Resolves when every worker has every model warm. */
  readonly ready: Promise<ModelReport[]>;

  constructor(config: Config, models: ServedModel[], observer: BatchObserver = {}) {
    this.pool = new Pool({
      workers: config.workers,
      models: models.map(({ id, task, onnxPath, pooling, padId, output, heads, specialIds, feeds }) => ({ id, task, onnxPath, pooling, padId, output, heads, specialIds, feeds })),
      session: { intraOpThreads: config.intraOpThreads, spinning: config.ortSpinning, memoryArena: config.ortMemoryArena },
      // Spinning keeps the extra threads of a solo session hot between a lone client's requests;
      // ONNX Runtime stops spinning soon after the last run, so an idle server still uses no CPU.
      soloSession:
        config.soloThreads > config.intraOpThreads
          ? { intraOpThreads: config.soloThreads, spinning: true, memoryArena: config.ortMemoryArena }
          : undefined,
    });
    this.scheduler = new Scheduler(
      this.pool,
      {
        maxBatchTokens: config.maxBatchTokens,
        maxBatchSize: config.maxBatchSize,
        queueCapacity: config.queueCapacity,
        maxInFlight: config.workers * 2,
        solo: config.soloThreads > config.intraOpThreads,
      },
      models,
      observer,
    );
    this.ready = this.pool.ready;
  }

  get isReady(): boolean {
    return this.pool.isReady;
  }

  /** Finishes queued and running work, then stops the workers. */
  async close(): Promise<void> {
    await this.scheduler.drain();
    await this.pool.close();
  }
}
