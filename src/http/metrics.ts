/**
 * Prometheus metrics at GET /metrics: HTTP requests, the engine's batches and queues, the worker
 * pool, model start-up and the embedding cache. Each server has its own registry (never prom-client's global one), so
 * several servers in one process keep separate counts.
 *
 * Request phases are read from the timings record a route reports (http/timing.ts), so every
 * route group that reports its timings is measured without knowing it.
 */
import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import type { EmbeddingCacheStats } from '../core/cache/embedding-cache.js';
import { CounterFamily, HistogramFamily, type CounterSeries, type HistogramSeries } from './metric-families.js';
import type { Phase } from './timing.js';

/** The series one method, route and status counts into. */
interface RequestSeries {
  requests: CounterSeries;
  seconds: HistogramSeries;
  phase(phase: string): HistogramSeries;
}

/** The series one model's batches count into. */
interface BatchSeries {
  size: HistogramSeries;
  fill: HistogramSeries;
  tokens: CounterSeries;
  paddedTokens: CounterSeries;
  inferenceSeconds: HistogramSeries;
}

/** One inference batch as the scheduler reports it (its BatchObserver). */
export interface BatchInfo {
  size: number;
  /** Real tokens in the batch. */
  tokens: number;
  /** Tokens run, padding included (longest x size). */
  paddedTokens: number;
  inferenceMs: number;
  /** `cpu` or the accelerator the batch ran on. */
  device: string;
}

/** What the metrics read from the engine at scrape time. */
export interface EngineStats {
  /** Served text model ids (a pull may add one). */
  models(): string[];
  /** Inputs waiting in a model's queue. */
  queueDepth(model: string): number;
  /** Batches handed to the workers and not yet finished. */
  batchesInFlight(): number;
  /** Worker threads started to replace one that died. */
  workerRestarts(): number;
  ready(): boolean;
  /** Resident bytes a loaded model's sessions hold (0 when unloaded). */
  residentBytes(model: string): number;
}

/** What the metrics read from the index replication at scrape time. */
export interface IndexReplicationStats {
  behind: number;
  lagSeconds: number;
  lastAppliedSequence: number;
}

const prefix = 'onnx_gateway_';
const secondsBuckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export class Metrics {
  readonly registry = new Registry();

  // The families counted on every request and every batch are our own (http/metric-families.ts).
  private readonly requests = new CounterFamily({
    name: `${prefix}http_requests_total`,
    help: 'HTTP requests answered, by route pattern and status.',
    labelNames: ['method', 'route', 'status'],
    registry: this.registry,
  });
  private readonly requestSeconds = new HistogramFamily({
    name: `${prefix}http_request_duration_seconds`,
    help: 'Time from receiving a request to sending its response.',
    labelNames: ['method', 'route'],
    buckets: secondsBuckets,
    registry: this.registry,
  });
  private readonly phaseSeconds = new HistogramFamily({
    name: `${prefix}request_phase_seconds`,
    help: 'Where the time of a model request went: tokenize, queue (longest wait of its inputs) and inference (summed over its batches); with images also parse, base64, header and preprocess; image edits: decode, edit, inference, encode.',
    labelNames: ['route', 'phase'],
    buckets: secondsBuckets,
    registry: this.registry,
  });
  private readonly batchSize = new HistogramFamily({
    name: `${prefix}batch_size`,
    help: 'Inputs per inference batch.',
    labelNames: ['model'],
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
    registry: this.registry,
  });
  private readonly batchFill = new HistogramFamily({
    name: `${prefix}batch_fill_ratio`,
    help: 'Real tokens / padded tokens of each inference batch (1 = no padding).',
    labelNames: ['model'],
    buckets: [0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99, 1],
    registry: this.registry,
  });
  private readonly tokens = new CounterFamily({
    name: `${prefix}tokens_total`,
    help: 'Real tokens run through a model, special tokens included.',
    labelNames: ['model'],
    registry: this.registry,
  });
  private readonly paddedTokens = new CounterFamily({
    name: `${prefix}padded_tokens_total`,
    help: 'Tokens run through a model, padding included; tokens_total / padded_tokens_total is the overall fill.',
    labelNames: ['model'],
    registry: this.registry,
  });
  private readonly deviceBatches = new CounterFamily({
    name: `${prefix}device_batches_total`,
    help: 'Inference batches run on a device (`cpu`, or the accelerator of a model placed on one).',
    labelNames: ['device'],
    registry: this.registry,
  });
  private readonly deviceInferenceSeconds = new HistogramFamily({
    name: `${prefix}device_inference_seconds`,
    help: 'Wall time of one inference batch, by the device it ran on.',
    labelNames: ['device'],
    buckets: secondsBuckets,
    registry: this.registry,
  });
  /** Per device: its batch count and inference time, bound once. */
  private readonly deviceSeries = new Map<string, { batches: CounterSeries; seconds: HistogramSeries }>();
  private readonly inferenceSeconds = new HistogramFamily({
    name: `${prefix}inference_seconds`,
    help: 'Wall time of one inference batch in a worker.',
    labelNames: ['model'],
    buckets: secondsBuckets,
    registry: this.registry,
  });
  private readonly modelLoadSeconds = new Gauge({
    name: `${prefix}model_load_seconds`,
    help: 'Time the last load of the model took: its sessions opened and warm.',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });
  private readonly modelLoads = new Counter({
    name: `${prefix}model_loads_total`,
    help: 'Loads of the model (at start, on demand, by an admin).',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });
  private readonly modelUnloads = new Counter({
    name: `${prefix}model_unloads_total`,
    help: 'Unloads of the model (keep-alive, to make room in the memory budget, by an admin).',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });
  private engine: EngineStats | undefined;
  private readonly series = new Map<string, RequestSeries>();
  private readonly batchSeries = new Map<string, BatchSeries>();
  private cache: { stats(): EmbeddingCacheStats } | undefined;

  constructor() {
    // Event-loop lag is sampled by a timer: prom-client's default of every 10 ms wakes an idle
    // server 100 times a second; every 100 ms still catches the stalls that matter.
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 100 });
    // prom-client calls `collect` with the metric as `this`: the engine is reached through a closure.
    const engine = () => this.engine;
    new Gauge({
      name: `${prefix}queue_depth`,
      help: "Inputs waiting in a model's queue.",
      labelNames: ['model'] as const,
      registers: [this.registry],
      collect() {
        for (const model of engine()?.models() ?? []) this.set({ model }, engine()!.queueDepth(model));
      },
    });
    new Gauge({
      name: `${prefix}batches_in_flight`,
      help: 'Batches handed to the workers and not yet finished.',
      registers: [this.registry],
      collect() {
        this.set(engine()?.batchesInFlight() ?? 0);
      },
    });
    new Gauge({
      name: `${prefix}model_resident_bytes`,
      help: "Resident memory the loaded model's sessions added to the process when it loaded (0 while unloaded).",
      labelNames: ['model'] as const,
      registers: [this.registry],
      collect() {
        for (const model of engine()?.models() ?? []) this.set({ model }, engine()!.residentBytes(model));
      },
    });
    let restartsSeen = 0;
    new Counter({
      name: `${prefix}worker_restarts_total`,
      help: 'Worker threads started to replace one that died.',
      registers: [this.registry],
      collect() {
        const restarts = engine()?.workerRestarts() ?? 0;
        if (restarts > restartsSeen) this.inc(restarts - restartsSeen);
        restartsSeen = restarts;
      },
    });
    new Gauge({
      name: `${prefix}ready`,
      help: '1 once every model is warm in every worker.',
      registers: [this.registry],
      collect() {
        this.set(engine()?.ready() ? 1 : 0);
      },
    });
  }

  /**
   * Reads the embedding cache's counts when scraped; without a cache there are no cache series.
   * The cache counts from its start, so the counters add what it counted since the last scrape.
   */
  watchCache(cache: { stats(): EmbeddingCacheStats } | undefined): void {
    if (!cache || this.cache) return;
    this.cache = cache;
    const stats = () => cache.stats();
    const seen = { hits: 0, sharedHits: 0, misses: 0, evictions: 0, sharedErrors: 0 };
    const advance = (counter: Counter<string>, name: keyof typeof seen, labels: Record<string, string> = {}) => {
      const now = stats()[name];
      // inc(0) too: series exist from the first scrape, so rates and ratios work from the start.
      counter.inc(labels, Math.max(0, now - seen[name]));
      seen[name] = now;
    };
    new Counter({
      name: `${prefix}embedding_cache_hits_total`,
      help: 'Embedding inputs served from the cache, by tier: local (this process) or shared (Redis).',
      labelNames: ['tier'] as const,
      registers: [this.registry],
      collect() {
        advance(this, 'hits', { tier: 'local' });
        advance(this, 'sharedHits', { tier: 'shared' });
      },
    });
    new Counter({
      name: `${prefix}embedding_cache_misses_total`,
      help: 'Embedding inputs the cache did not have, computed by the engine (an input repeated within a request counts once).',
      registers: [this.registry],
      collect() {
        advance(this, 'misses');
      },
    });
    new Counter({
      name: `${prefix}embedding_cache_evictions_total`,
      help: 'Entries evicted from the local cache to stay within cacheMaxMb.',
      registers: [this.registry],
      collect() {
        advance(this, 'evictions');
      },
    });
    new Counter({
      name: `${prefix}embedding_cache_shared_errors_total`,
      help: 'Redis commands of the shared cache tier that failed (those inputs were computed).',
      registers: [this.registry],
      collect() {
        advance(this, 'sharedErrors');
      },
    });
    new Gauge({
      name: `${prefix}embedding_cache_bytes`,
      help: 'Bytes the local embedding cache holds, as counted against cacheMaxMb (vectors and keys).',
      registers: [this.registry],
      collect() {
        this.set(stats().bytes);
      },
    });
    new Gauge({
      name: `${prefix}embedding_cache_entries`,
      help: 'Vectors in the local embedding cache.',
      registers: [this.registry],
      collect() {
        this.set(stats().entries);
      },
    });
  }

  /** Reads queue depth, in-flight batches, restarts and readiness from the engine when scraped. */
  watch(engine: EngineStats): void {
    this.engine = engine;
    // Series exist from the start, so rates and ratios work before the first batch.
    for (const model of engine.models()) this.batchSeriesOf(model);
  }

  /** The scheduler's batch observer. */
  readonly onBatch = (model: string, batch: BatchInfo): void => {
    const series = this.batchSeriesOf(model);
    series.size.observe(batch.size);
    series.fill.observe(batch.paddedTokens > 0 ? batch.tokens / batch.paddedTokens : 1);
    series.tokens.inc(batch.tokens);
    series.paddedTokens.inc(batch.paddedTokens);
    series.inferenceSeconds.observe(batch.inferenceMs / 1000);
    let device = this.deviceSeries.get(batch.device);
    if (!device) {
      const labels = { device: batch.device };
      this.deviceSeries.set(
        batch.device,
        (device = { batches: this.deviceBatches.labels(labels), seconds: this.deviceInferenceSeconds.labels(labels) }),
      );
    }
    device.batches.inc(1);
    device.seconds.observe(batch.inferenceMs / 1000);
  };

  private batchSeriesOf(model: string): BatchSeries {
    let series = this.batchSeries.get(model);
    if (!series) {
      const labels = { model };
      series = {
        size: this.batchSize.labels(labels),
        fill: this.batchFill.labels(labels),
        tokens: this.tokens.labels(labels),
        paddedTokens: this.paddedTokens.labels(labels),
        inferenceSeconds: this.inferenceSeconds.labels(labels),
      };
      this.batchSeries.set(model, series);
    }
    return series;
  }

  /**
   * With Redis: how far this replica's copy of the local index is behind the stream of writes,
   * read when scraped.
   */
  watchIndexReplication(status: () => Promise<IndexReplicationStats>): void {
    const gauge = (name: string, help: string, read: (stats: IndexReplicationStats) => number) =>
      new Gauge({
        name: `${prefix}${name}`,
        help,
        registers: [this.registry],
        async collect() {
          this.set(read(await status()));
        },
      });
    gauge(
      'index_replication_behind_entries',
      'Index writes in the Redis stream this replica has not applied yet.',
      (s) => s.behind,
    );
    gauge(
      'index_replication_lag_seconds',
      'Time between the newest index write in the stream and the last one this replica applied (0 when caught up).',
      (s) => s.lagSeconds,
    );
    gauge(
      'index_replication_applied_entries',
      "Index writes applied to this replica's copy, counted from the first ever written.",
      (s) => s.lastAppliedSequence,
    );
  }

  /** The workers' reports once the models are warm. */
  /** The engine's lifecycle observer. */
  readonly onLoad = (model: string, info: { seconds: number }): void => {
    this.modelLoadSeconds.set({ model }, info.seconds);
    this.modelLoads.inc({ model });
  };

  readonly onUnload = (model: string): void => {
    this.modelUnloads.inc({ model });
  };

  /** The series of one method, route and status, looked up by one string key per request. */
  private seriesOf(method: string, route: string, status: number): RequestSeries {
    const key = `${method} ${status} ${route}`;
    let series = this.series.get(key);
    if (!series) {
      const phases = new Map<string, HistogramSeries>();
      series = {
        requests: this.requests.labels({ method, route, status: String(status) }),
        seconds: this.requestSeconds.labels({ method, route }),
        phase: (phase) => {
          let child = phases.get(phase);
          if (!child) phases.set(phase, (child = this.phaseSeconds.labels({ route, phase })));
          return child;
        },
      };
      // Routes are patterns and statuses few: the map stays small.
      this.series.set(key, series);
    }
    return series;
  }

  /** The request hook and the /metrics route; call on the root app so every route is counted. */
  register(app: FastifyInstance): void {
    app.addHook('onResponse', (request, reply, done) => {
      // The route pattern, never the raw URL, so labels stay few; unmatched URLs share one.
      const route = request.routeOptions.url ?? 'unmatched';
      const method = request.method;
      const series = this.seriesOf(method, route, reply.statusCode);
      series.requests.inc();
      series.seconds.observe(reply.elapsedTime / 1000);
      const timings = request.timings;
      if (timings) for (const phase in timings) series.phase(phase).observe(timings[phase as Phase]! / 1000);
      done();
    });
    app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
      const text = await this.registry.metrics();
      return reply.type(this.registry.contentType).send(text);
    });
  }
}
