/**
 * The text engine: the scheduler and a lane of sessions per loaded model, and the models' lifecycle.
 *
 * A model loads in two steps: one session opens (alone, so the process's resident size grows by what
 * a session holds), then its placement is decided from that size and the memory budget (placement.ts)
 * and the lane grows to it. At start the listed models load together, each measured first, so that
 * they share the budget; later loads (a request for an unloaded model, an admin's load) take what is
 * free, unloading the least recently used idle models first. A model idle for its keep-alive is
 * unloaded; a request for it loads it again and waits. Loads run one at a time.
 * An image-text model's vision tower is a model of its own here (`<model>#vision`): it is loaded
 * when images come, and placed in the budget beside the text tower like any model.
 * Knows models only as load specs with their ids, never as operations.
 */
import type { Config } from '../config.js';
import { ApiError, StartupError } from '../errors.js';
import type { ServedModel } from '../models/registry.js';
import { ModelFilesError } from '../models/facts.js';
import { inSpan, tracer } from '../tracing/spans.js';
import type { ModelReport } from '../worker/protocol.js';
import { memoryBudgetBytes, residentBytes } from './memory.js';
import { ImagePreprocessPool } from './image-preprocess-pool.js';
import { ModelLane } from './model-lane.js';
import {
  placeModels,
  placementBytes,
  type Placement,
  type PlacementError,
  type PlacementLimits,
  type PlacementRequest,
} from './placement.js';
import { Scheduler, type BatchObserver, type Lane, type Lanes } from './scheduler.js';

export type ModelStatus = 'loaded' | 'loading' | 'unloaded';

/** What the engine tells about a model (the models list, Ollama's running models, metrics). */
export interface ModelState {
  status: ModelStatus;
  placement?: Placement;
  /** Resident bytes the model's sessions added to the process when it loaded. */
  residentBytes?: number;
  /** When an idle loaded model will be unloaded (keep-alive), if it will. */
  expiresAt?: Date;
}

export interface LifecycleObserver {
  onLoad?(model: string, info: { seconds: number; residentBytes: number; placement: Placement }): void;
  onUnload?(model: string): void;
}

export interface EngineOptions {
  config: Pick<
    Config,
    | 'workers'
    | 'intraOpThreads'
    | 'soloThreads'
    | 'ortSpinning'
    | 'ortMemoryArena'
    | 'maxBatchTokens'
    | 'gpuMaxBatchTokens'
    | 'maxBatchSize'
    | 'queueCapacity'
    | 'memoryBudgetMb'
    | 'preload'
  > &
    Partial<Pick<Config, 'imageMaxPixels'>> & { keepAliveMs: number };
  models: ServedModel[];
  observer?: BatchObserver & LifecycleObserver;
  /** How a model's first session is measured (tests give fake sizes). */
  measureSession?: (model: ServedModel, measured: number) => number;
}

/** What the engine keeps per model. */
interface Entry {
  spec: ServedModel;
  status: ModelStatus;
  lane?: ModelLane;
  /** The scheduler's view of the lane, present while loaded. */
  view?: Lane;
  placement?: Placement;
  sessionBytes?: number;
  residentBytes?: number;
  loading?: Promise<void>;
  lastUsed: number;
  keepAliveMs: number;
  timer?: NodeJS.Timeout;
}

/** Seconds a request waits before retrying a load that did not fit: models in use may go idle by then. */
const retryAfterSeconds = 5;

export class Engine implements Lanes {
  readonly scheduler: Scheduler;
  private readonly entries = new Map<string, Entry>();
  private readonly limits: PlacementLimits;
  /** Loads one at a time: a session's size is measured by the process's resident size. */
  private loadChain: Promise<unknown> = Promise.resolve();
  private closed = false;
  private warm = false;
  /** Restarts counted by lanes since closed. */
  private pastRestarts = 0;
  /** Decodes and preprocesses the images of every vision tower's batches (its threads start as the first vision tower loads). */
  private readonly preprocess = new ImagePreprocessPool();
  /** Resolves once the models to load at start are warm (at once without preload); rejects if one can not load. */
  readonly ready: Promise<ModelReport[]>;

  constructor(private readonly options: EngineOptions) {
    const { config } = options;
    this.limits = {
      maxSessions: config.workers,
      threadsPerSession: config.intraOpThreads,
      soloThreads: config.soloThreads,
      budgetBytes: memoryBudgetBytes(config.memoryBudgetMb),
    };
    const models = options.models.flatMap(withTowers);
    for (const spec of models)
      this.entries.set(spec.id, { spec, status: 'unloaded', lastUsed: 0, keepAliveMs: config.keepAliveMs });
    this.scheduler = new Scheduler(
      this,
      {
        maxBatchTokens: config.maxBatchTokens,
        maxBatchSize: config.maxBatchSize,
        queueCapacity: config.queueCapacity,
        maxInFlight: 2 * config.workers * config.intraOpThreads,
      },
      models,
      options.observer,
    );
    this.ready = config.preload
      ? this.serialized(() => this.loadTogether([...this.entries.values()]))
      : Promise.resolve([]);
    this.ready.then(
      () => (this.warm = true),
      () => undefined,
    );
  }

  get isReady(): boolean {
    return this.warm;
  }

  get budgetBytes(): number {
    return this.limits.budgetBytes;
  }

  /** Threads started to replace threads that died, all lanes. */
  get restarts(): number {
    let total = this.pastRestarts;
    for (const entry of this.entries.values()) total += entry.lane?.restarts ?? 0;
    return total;
  }

  state(model: string): ModelState | undefined {
    const entry = this.entries.get(model);
    if (!entry) return undefined;
    const expires = entry.status === 'loaded' && !keptForever(entry.keepAliveMs) && this.scheduler.pending(model) === 0;
    return {
      status: entry.status,
      ...(entry.status === 'loaded' ? { placement: entry.placement, residentBytes: entry.residentBytes } : {}),
      ...(expires
        ? { expiresAt: new Date(Date.now() + Math.max(0, entry.lastUsed + entry.keepAliveMs - performance.now())) }
        : {}),
    };
  }

  /** The scheduler's lane of a loaded model (Lanes). */
  lane(model: string): Lane | undefined {
    return this.entries.get(model)?.view;
  }

  /** A request waits for a model that is not loaded: load it (Lanes). */
  wanted(model: string): void {
    const entry = this.entries.get(model);
    if (!entry || entry.status !== 'unloaded' || this.closed) return;
    this.load(model).catch((error: unknown) => {
      // Its waiting requests learn why; the files' problem itself is for the log (model_load_failed).
      const failure =
        error instanceof ApiError
          ? error
          : new ApiError('model_load_failed', `The model "${model}" could not be loaded: ${(error as Error).message}`, {
              cause: error,
            });
      this.scheduler.failWaiting(model, failure);
    });
  }

  /** A model's last waiting or running item is done (Lanes): its keep-alive starts. */
  idle(model: string): void {
    const entry = this.entries.get(model);
    if (!entry) return;
    entry.lastUsed = performance.now();
    this.armKeepAlive(entry);
  }

  /** How long a model stays loaded once idle (Ollama's keep_alive: negative or infinite for ever, 0 unloads at once). */
  keepAlive(model: string, ms: number): void {
    const entry = this.entries.get(model);
    if (!entry) return;
    entry.keepAliveMs = ms;
    if (this.scheduler.pending(model) === 0) this.armKeepAlive(entry);
  }

  /** Serves a model added since start (a pull); one served already is unloaded, to load its new files on demand. */
  async add(served: ServedModel): Promise<void> {
    for (const model of withTowers(served)) await this.addOne(model);
  }

  private async addOne(model: ServedModel): Promise<void> {
    const entry = this.entries.get(model.id);
    if (entry) {
      await this.unload(model.id);
      entry.spec = model;
      entry.sessionBytes = undefined;
      return;
    }
    this.entries.set(model.id, {
      spec: model,
      status: 'unloaded',
      lastUsed: 0,
      keepAliveMs: this.options.config.keepAliveMs,
    });
    this.scheduler.addModel(model);
  }

  /** Served model ids. */
  get models(): string[] {
    return [...this.entries.keys()];
  }

  /** Loads a model (no-op when loaded); resolves when it serves. */
  load(model: string): Promise<void> {
    const entry = this.entries.get(model);
    if (!entry)
      return Promise.reject(
        new ApiError('model_not_found', `The model "${model}" is not served here.`, { param: 'model' }),
      );
    if (entry.status === 'loaded') return Promise.resolve();
    if (entry.loading) return entry.loading;
    if (this.closed) return Promise.reject(new ApiError('shutting_down'));
    entry.status = 'loading';
    const loading = this.serialized(() => this.loadAlone(entry)).finally(() => {
      entry.loading = undefined;
    });
    entry.loading = loading;
    return loading;
  }

  /** Unloads a model once its running batches end; items still waiting for it load it again. */
  async unload(model: string): Promise<void> {
    const entry = this.entries.get(model);
    if (!entry) throw new ApiError('model_not_found', `The model "${model}" is not served here.`, { param: 'model' });
    if (entry.loading) await entry.loading.catch(() => undefined);
    if (entry.status !== 'loaded') return;
    await this.release(entry);
    if (this.scheduler.pending(model) > 0) this.wanted(model);
  }

  /** Finishes queued and running work, then closes every lane. */
  async close(): Promise<void> {
    this.closed = true;
    await this.ready.catch(() => undefined);
    await this.scheduler.drain();
    await this.loadChain.catch(() => undefined);
    await Promise.all([...this.entries.values()].map((entry) => this.release(entry)));
    await this.preprocess.close();
  }

  private serialized<T>(step: () => Promise<T>): Promise<T> {
    const next = this.loadChain.then(step, step);
    this.loadChain = next.catch(() => undefined);
    return next;
  }

  /** The models listed at start: one session each, measured, then placed together. */
  private loadTogether(entries: Entry[]): Promise<ModelReport[]> {
    return tracer
      ? inSpan(tracer, 'load models', { 'onnx_gateway.models': entries.map((entry) => entry.spec.id) }, () =>
          this.loadTogetherUntraced(entries),
        )
      : this.loadTogetherUntraced(entries);
  }

  private async loadTogetherUntraced(entries: Entry[]): Promise<ModelReport[]> {
    const reports: ModelReport[] = [];
    try {
      const threads = this.expectedThreads(entries);
      for (const entry of entries) {
        entry.status = 'loading';
        reports.push(await this.openFirstSession(entry, threads.get(entry.spec.id)));
      }
      const { placements, refused } = placeModels(
        entries.map((entry) => this.request(entry)),
        this.limits,
      );
      if (refused.length > 0) throw new MemoryBudgetError(refused);
      for (const entry of entries) await this.complete(entry, placements.get(entry.spec.id)!);
      return reports;
    } catch (error) {
      await Promise.all(entries.map((entry) => this.release(entry)));
      throw error;
    }
  }

  /** A model loaded on its own: room made by unloading idle models, then placed in what is free. */
  private loadAlone(entry: Entry): Promise<void> {
    return tracer
      ? inSpan(tracer, `load ${entry.spec.id}`, { 'gen_ai.request.model': entry.spec.id }, (span) =>
          this.loadAloneUntraced(entry).then(() => {
            if (entry.placement) span.setAttributes(placementAttributes(entry.placement));
          }),
        )
      : this.loadAloneUntraced(entry);
  }

  private async loadAloneUntraced(entry: Entry): Promise<void> {
    if (this.closed) throw new ApiError('shutting_down');
    try {
      // Room for one session, by its last measure or the floor its files give, before opening it.
      const room = await this.makeRoom(estimatedBytes(entry), entry);
      const started = performance.now();
      await this.openFirstSession(entry, this.expectedThreads([entry], room).get(entry.spec.id));
      // The measure may ask for more room than the estimate did.
      const free = await this.makeRoom(entry.sessionBytes!, entry);
      const { placements, refused } = placeModels([this.request(entry)], this.limits, free);
      if (refused.length > 0) throw this.noRoom(refused[0]!);
      await this.complete(entry, placements.get(entry.spec.id)!, started);
    } catch (error) {
      await this.release(entry);
      throw error;
    }
  }

  /**
   * The intra-op threads each model's sessions are expected to get: its placement on the size its
   * sessions were last measured at, or the floor its files give. Its first session opens with them,
   * so that a lane placed in fewer sessions of more threads is not closed and opened again once
   * measured: a real-size model's session takes seconds to open, and what a closed one frees may
   * stay with the allocator (glibc keeps freed blocks in its arenas) while the next ones open.
   */
  private expectedThreads(entries: Entry[], freeBytes?: number): Map<string, number> {
    const requests = entries.map((entry) => this.request(entry, estimatedBytes(entry)));
    const { placements } = placeModels(requests, this.limits, freeBytes);
    return new Map([...placements].map(([id, placement]) => [id, placement.threadsPerSession]));
  }

  private request(entry: Entry, sessionBytes = entry.sessionBytes!): PlacementRequest {
    return { id: entry.spec.id, sessionBytes, device: entry.spec.device };
  }

  /** The budget less what the other loaded and loading models hold. */
  private freeBytes(except?: Entry): number {
    let used = 0;
    for (const entry of this.entries.values()) {
      if (entry === except || entry.status === 'unloaded') continue;
      used += entry.placement ? placementBytes(entry.placement, entry.sessionBytes!) : (entry.sessionBytes ?? 0);
    }
    return this.limits.budgetBytes - used;
  }

  /** Unloads idle models, least recently used first, until `bytes` are free; returns what is free. */
  private async makeRoom(bytes: number, loading: Entry): Promise<number> {
    let free = this.freeBytes(loading);
    const idle = [...this.entries.values()]
      .filter((entry) => entry !== loading && entry.status === 'loaded' && this.scheduler.pending(entry.spec.id) === 0)
      .sort((a, b) => a.lastUsed - b.lastUsed);
    const releasing: Promise<void>[] = [];
    for (const entry of idle) {
      if (free >= bytes) break;
      free += placementBytes(entry.placement!, entry.sessionBytes!);
      releasing.push(this.release(entry));
    }
    // Closed before the next session is measured, so that the measure is not of their going.
    await Promise.all(releasing);
    return free;
  }

  private noRoom(error: PlacementError): ApiError {
    // Larger than the whole budget: no wait makes it fit.
    if (error.sessionBytes > error.budgetBytes)
      return new ApiError('insufficient_memory', error.message, { permanent: true });
    const message = `${error.message} No loaded model is idle to make room.`;
    return new ApiError('insufficient_memory', message, { retryAfterSeconds });
  }

  /** Opens a model's first session alone, with `threads` intra-op threads, and measures what it added to the process. */
  private async openFirstSession(entry: Entry, threads?: number): Promise<ModelReport> {
    const { config } = this.options;
    const before = residentBytes();
    const lane = new ModelLane(entry.spec, entry.spec.device, threads ?? config.intraOpThreads, {
      spinning: config.ortSpinning,
      memoryArena: config.ortMemoryArena,
      imageMaxPixels: config.imageMaxPixels,
      preprocess: this.preprocess,
    });
    entry.lane = lane;
    const report = await lane.report;
    const measured = Math.max(residentBytes() - before, 1);
    entry.sessionBytes = this.options.measureSession?.(entry.spec, measured) ?? sessionFloor(entry.spec, measured);
    entry.residentBytes = measured;
    // The registry read the model's width from its files; the warm-up run confirms it.
    if (entry.spec.task === 'embedding' && entry.spec.dimensions !== report.width) {
      throw new ModelFilesError(
        `Model "${entry.spec.id}": its files say ${entry.spec.dimensions} dimensions, but the graph gives vectors of ${report.width}.`,
      );
    }
    return report;
  }

  /** Grows the lane to its placement (or reopens it with other threads per session) and starts serving it. */
  private async complete(entry: Entry, placement: Placement, started = performance.now()): Promise<void> {
    const { config } = this.options;
    const before = residentBytes();
    if (placement.threadsPerSession !== entry.lane!.threadsPerSession) {
      // The measure placed the model otherwise than its estimate did: the first session has other threads.
      await entry.lane!.close();
      entry.lane = new ModelLane(entry.spec, placement.device, placement.threadsPerSession, {
        spinning: config.ortSpinning,
        memoryArena: config.ortMemoryArena,
        imageMaxPixels: config.imageMaxPixels,
        preprocess: this.preprocess,
      });
      await entry.lane.report;
    }
    await entry.lane!.grow(placement);
    const lane = entry.lane!;
    entry.placement = placement;
    // The first session's measure and what the rest added (a reopened lane freed the first).
    entry.residentBytes = Math.max(entry.residentBytes! + residentBytes() - before, 1);
    // An accelerator's one session takes far larger batches than a CPU core.
    const maxBatchTokens = placement.device === 'cpu' ? config.maxBatchTokens : config.gpuMaxBatchTokens;
    entry.view = {
      sessions: placement.sessions,
      threadsPerSession: placement.threadsPerSession,
      solo: lane.hasSolo,
      maxBatchTokens,
      device: placement.device,
      loadedAt: performance.now(),
      run: (task) => lane.run(task),
    };
    entry.status = 'loaded';
    entry.lastUsed = performance.now();
    this.options.observer?.onLoad?.(entry.spec.id, {
      seconds: (performance.now() - started) / 1000,
      residentBytes: entry.residentBytes,
      placement,
    });
    this.scheduler.wake();
    if (this.scheduler.pending(entry.spec.id) === 0) this.armKeepAlive(entry);
  }

  private armKeepAlive(entry: Entry): void {
    clearTimeout(entry.timer);
    entry.timer = undefined;
    if (entry.status !== 'loaded' || keptForever(entry.keepAliveMs) || this.closed) return;
    const unloadIfIdle = () => {
      if (entry.status === 'loaded' && this.scheduler.pending(entry.spec.id) === 0) void this.release(entry);
    };
    if (entry.keepAliveMs === 0) unloadIfIdle();
    else entry.timer = setTimeout(unloadIfIdle, entry.keepAliveMs).unref();
  }

  /** Stops dispatching to a model's lane, waits for its batches, closes it. */
  private async release(entry: Entry): Promise<void> {
    clearTimeout(entry.timer);
    entry.timer = undefined;
    const lane = entry.lane;
    const wasLoaded = entry.status === 'loaded';
    entry.view = undefined;
    entry.lane = undefined;
    entry.placement = undefined;
    entry.status = 'unloaded';
    if (!lane) return;
    await lane.close();
    this.pastRestarts += lane.restarts;
    if (wasLoaded) this.options.observer?.onUnload?.(entry.spec.id);
  }
}

/**
 * What one more session of a model on the CPU is taken to hold: what its first session added to
 * the process, and never less than its weights and three tenths more (its activations, ONNX
 * Runtime's pre-packed weights and the graph's own structures: sessions of the real-size
 * multilingual-e5-small stand-in hold 1.22-1.28 times its 448 MiB of weights). The process's
 * growth is read from its resident size, which other threads' allocations and frees move while
 * the session opens, and which memory the process freed earlier and the session reuses leaves
 * unmoved; a measure under what sessions hold would let the placement open more than the budget holds.
 */
function sessionFloor(model: ServedModel, measured: number): number {
  if (model.device !== 'cpu') return measured;
  return Math.max(measured, Math.ceil(model.description.size * 1.3));
}

/** A session of a model before its first is measured: its last measure, or the floor its files give. */
function estimatedBytes(entry: Entry): number {
  return entry.sessionBytes ?? sessionFloor(entry.spec, entry.spec.description.size);
}

/** A served model and, for an image-text model, its vision tower: the engine's models. */
function withTowers(model: ServedModel): ServedModel[] {
  return model.images ? [model, model.images.tower] : [model];
}

/** A keep-alive that never unloads: negative, or too long for a timer (duration.ts gives Infinity for "for ever"). */
function keptForever(ms: number): boolean {
  return ms < 0 || ms > maxTimerMs;
}

/** setTimeout fires at once for longer delays. */
const maxTimerMs = 2 ** 31 - 1;

/** Models listed to load at start that do not fit the budget even as one session each. */
export class MemoryBudgetError extends StartupError {
  override name = 'MemoryBudgetError';
  readonly code = 'memory_budget';
  constructor(refused: PlacementError[]) {
    super(refused.map((error) => error.message).join(' '));
  }
}

/** A loaded model's placement, as its load span reports it. */
function placementAttributes(placement: Placement) {
  return {
    'onnx_gateway.device': placement.device,
    'onnx_gateway.sessions': placement.sessions,
    'onnx_gateway.threads_per_session': placement.threadsPerSession,
  };
}
