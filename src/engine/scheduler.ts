/**
 * The scheduler: one queue per model, batches formed when a worker slot frees up.
 *
 * Every input of every request is its own queue item, so concurrent requests share batches and a
 * large request is split into as many batches as it needs; a user's request queues its inputs
 * longest first. A batch starts from the oldest waiting item (no request starves) and takes the
 * waiting items closest to it in length, as long as the padded size (longest x count) stays within
 * the token budget and padding stays a small share of the work. Nothing waits for a batch to
 * fill: a lone item on an idle server is dispatched at once, and under load the queue fills by
 * itself while the workers are busy. A batch that is the only work on the server is marked solo:
 * one worker's share of the cores would leave the rest idle.
 *
 * A model that gives several kinds of output (dense, sparse, token vectors) has a queue per kind,
 * so a batch never mixes them; sparse and token results have rows of their own lengths.
 *
 * Bulk work (a batch's requests) has queues of its own, served only when no interactive queue can
 * take the free slot. Nothing preempts a batch already on a worker, so while users are about (a
 * request in the last `windowMs`) bulk work also keeps out of their way: no bulk batch goes while a
 * user's input waits, nor while one runs or in the `graceMs` after it lands (the round trip to the
 * user's next request) unless bulk has been held `maxHoldMs` (busy users slow a batch, they do not
 * stop it, and cores their inputs leave idle do not stay idle long); bulk batches are then short (a
 * share of the token budget) and take a session's running slot only, never its ready one; and a
 * user's input that finds only bulk batches running waits for them to land and runs solo, with
 * every core, as it would on an idle server. Without users about, bulk batches are as large as any
 * and fill every slot, for the batch's throughput.
 *
 * An image-text model's vision tower is a model of its own here: its items are images, each
 * counted as the tower's sequence length against the token budget. A batch hands their encoded
 * bytes to the lane (transferred), which has them decoded on the preprocessing threads; an image
 * that can not be decoded fails its own request only. The first try transfers copies, so that a
 * batch whose worker dies is tried again with the originals, as a text batch is.
 */
import { context, trace, type Span, type SpanContext, type Tracer } from '@opentelemetry/api';
import { onAbort } from '../abort.js';
import { ApiError } from '../errors.js';
import { activeSpanContext, failed, linksTo, tracer } from '../tracing/spans.js';
import type { BatchResult, BatchTask, OutputKind } from '../worker/protocol.js';

export interface EngineInput {
  /** Token ids; empty for an image. */
  ids: Int32Array;
  typeIds?: Uint8Array;
  /** How many leading tokens are attended (absent: all); see BatchTask.attended. */
  attended?: number;
  /**
   * An image for a vision tower: its encoded bytes (their buffer is handed to the worker, so it
   * must be the image's alone), the tokens it counts for, and the request field that sent it.
   */
  image?: { bytes: Uint8Array; tokens: number; param: string };
}

export interface JobResult {
  /**
   * dense: one row of `width` values per input, in input order. sparse: every input's nonzero
   * weights, concatenated in input order (`counts` per input, vocabulary ids in `indices`).
   * tokens: every input's token vectors of `width` values, concatenated (`counts` tokens each).
   */
  output: Float32Array;
  width: number;
  counts?: Int32Array;
  indices?: Int32Array;
  /** Longest wait of any input between submission and dispatch. */
  queueMs: number;
  /** Of that wait, how long the model was loading: 0 when it was loaded at submission. */
  loadMs: number;
  /** Wall time of the inference runs this job took part in, summed. */
  inferenceMs: number;
  /** A vision tower's: wall time of the workers' decoding and preprocessing of the batches' images, summed. */
  preprocessMs?: number;
  batches: number;
}

/** A loaded model's sessions, as the scheduler sees them (model-lane.ts). */
export interface Lane {
  /** Sessions that run batches side by side. */
  readonly sessions: number;
  /** Intra-op threads of each: a batch in flight counts them against the server's threads. */
  readonly threadsPerSession: number;
  /** Whether the model has a solo session, for a batch that runs alone on the server. */
  readonly solo: boolean;
  /** The lane's own token budget per batch (an accelerator's); the scheduler's when absent. */
  readonly maxBatchTokens?: number;
  /** `cpu` or the accelerator the lane runs on, for the batch observer. */
  readonly device: string;
  /** When the lane began serving (performance.now()): inputs submitted before it waited for the model to load. */
  readonly loadedAt?: number;
  run(task: BatchTask): Promise<BatchResult>;
}

/** Where batches go: a lane per loaded model. */
export interface Lanes {
  /** The model's lane; undefined while it is not loaded, and its items wait. */
  lane(model: string): Lane | undefined;
  /** Items of a model without a lane are waiting (the engine loads it, then calls `wake`). */
  wanted?(model: string): void;
  /** A model's last waiting or running item is done. */
  idle?(model: string): void;
}

export interface SchedulerOptions {
  maxBatchTokens: number;
  maxBatchSize: number;
  /** Items waiting per model before submissions are refused. */
  queueCapacity: number;
  /**
   * Intra-op threads of the batches handed to the lanes at once, all models together. Above the
   * cores, a worker finds its next batch ready; a lane also holds at most two batches per session.
   */
  maxInFlight: number;
  bulkYield?: Partial<BulkYield>;
}

/** Interactive requests go first; bulk inputs take the slots they leave. */
export type Priority = 'interactive' | 'bulk';

/** How bulk work makes way for users (see the file's comment); times in ms. */
export interface BulkYield {
  /** Bulk work yields for this long after a user's request was submitted or answered. */
  windowMs: number;
  /** After a user's batch lands, bulk waits this long for that user's next request... */
  graceMs: number;
  /** ...unless bulk has been held back this long (by that user's input running, or by the grace). */
  maxHoldMs: number;
  /** A bulk batch's token budget while yielding, as a share of the lane's (its first input always goes). */
  budgetShare: number;
}

export const defaultBulkYield: BulkYield = { windowMs: 2000, graceMs: 50, maxHoldMs: 500, budgetShare: 0.25 };

export interface BatchObserver {
  onBatch?(
    model: string,
    info: { size: number; tokens: number; paddedTokens: number; inferenceMs: number; device: string },
  ): void;
}

/** Least share of a batch's padded tokens that are real tokens. */
const minFill = 0.8;
/** How far into a queue batch forming looks for inputs of similar length. */
const lookahead = 512;

class Job {
  readonly output: (Float32Array | undefined)[];
  /** sparse: each input's vocabulary ids. */
  readonly indices: (Int32Array | undefined)[];
  remaining: number;
  queueMs = 0;
  loadMs = 0;
  inferenceMs = 0;
  preprocessMs = 0;
  batches = 0;
  width = 0;
  settled = false;
  /** Detaches the abort listener once the job is settled. */
  cleanup: (() => void) | undefined;
  /** With tracing on: the span that submitted the job (its batches link to it) and its wait in the queue. */
  caller: SpanContext | undefined;
  waitSpan: Span | undefined;
  /** Inputs not yet handed to a lane: the wait ends when the last one goes. */
  undispatched: number;
  constructor(
    readonly model: string,
    readonly kind: OutputKind,
    readonly priority: Priority,
    count: number,
    readonly resolve: (result: JobResult) => void,
    readonly reject: (error: unknown) => void,
  ) {
    this.output = new Array<Float32Array | undefined>(count);
    this.indices = new Array<Int32Array | undefined>(count);
    this.remaining = count;
    this.undispatched = count;
  }

  /** Opens the job's `queue wait` span, a child of the span that submitted it. */
  traceWait(active: Tracer): void {
    this.caller = activeSpanContext();
    // The model and the inputs are the operation's (its span and its tokenize span say them).
    this.waitSpan = active.startSpan('queue wait', { attributes: { 'onnx_gateway.priority': this.priority } });
  }

  /** `count` of the job's inputs went in `batch`; the wait ends when none is left queued. */
  dispatched(count: number, batch: Span): void {
    this.undispatched -= count;
    if (!this.waitSpan) return;
    this.waitSpan.addLink({ context: batch.spanContext() });
    if (this.undispatched <= 0) this.endWait();
  }

  endWait(): void {
    this.waitSpan?.end();
    this.waitSpan = undefined;
  }
}

interface Item {
  job: Job;
  index: number;
  ids: Int32Array;
  typeIds?: Uint8Array;
  attended?: number;
  image?: EngineInput['image'];
  length: number;
  enqueuedAt: number;
}

interface Queue {
  model: string;
  kind: OutputKind;
  priority: Priority;
  items: Item[];
  maxBatchSize: number;
  /** Batches of one length only: the model's graph takes no attention mask and padding would change its vectors. */
  uniformLength: boolean;
}

/** A model as the scheduler queues it. */
export interface QueuedModel {
  id: string;
  maxBatchSize?: number;
  feeds?: { uniformLength?: boolean };
}

export class Scheduler {
  private readonly queues = new Map<string, Queue>();
  /** Batches in flight, all models. */
  private inFlight = 0;
  /** Intra-op threads of the batches in flight. */
  private threadsInFlight = 0;
  /** Batches in flight per model. */
  private readonly modelInFlight = new Map<string, number>();
  /** Batches in flight by priority, all models. */
  private interactiveInFlight = 0;
  private bulkInFlight = 0;
  private readonly bulkYield: BulkYield;
  /** When a user's request was last submitted or answered, and when a user's batch last landed. */
  private lastInteractive = -Infinity;
  private lastInteractiveLanded = -Infinity;
  /** Since when bulk inputs have been held back for users (undefined: they are not). */
  private bulkHeldSince: number | undefined;
  /** Wakes the scheduler when bulk work held back for a user's next request may go. */
  private holdTimer: { at: number; timer: ReturnType<typeof setTimeout> } | undefined;
  /** Recent throughput in items per second, for how long a refused request should wait. */
  private itemsPerSecond = 0;
  private closed = false;
  private idleWaiters: (() => void)[] = [];

  constructor(
    private readonly lanes: Lanes,
    private readonly options: SchedulerOptions,
    models: QueuedModel[],
    private readonly observer: BatchObserver = {},
  ) {
    this.bulkYield = { ...defaultBulkYield, ...options.bulkYield };
    for (const model of models) this.addModel(model);
  }

  /** A model's queues; a model not added is refused as not served. */
  addModel(model: QueuedModel): void {
    const maxBatchSize = Math.min(model.maxBatchSize ?? this.options.maxBatchSize, this.options.maxBatchSize);
    const uniformLength = model.feeds?.uniformLength === true;
    for (const [key, queue] of this.queues)
      if (queue.model === model.id) this.queues.set(key, { ...queue, maxBatchSize, uniformLength });
    if (!this.queues.has(model.id))
      this.queues.set(model.id, {
        model: model.id,
        kind: 'dense',
        priority: 'interactive',
        items: [],
        maxBatchSize,
        uniformLength,
      });
  }

  /** The queue of a model's output kind and priority, made on first use (undefined for a model not served). */
  private queueOf(model: string, kind: OutputKind, priority: Priority = 'interactive'): Queue | undefined {
    const dense = this.queues.get(model);
    if (!dense || (kind === 'dense' && priority === 'interactive')) return dense;
    const key = `${model}\u0000${kind}${priority === 'bulk' ? '\u0000bulk' : ''}`;
    let queue = this.queues.get(key);
    if (!queue)
      this.queues.set(
        key,
        (queue = {
          model,
          kind,
          priority,
          items: [],
          maxBatchSize: dense.maxBatchSize,
          uniformLength: dense.uniformLength,
        }),
      );
    return queue;
  }

  /** Items waiting in a model's queue (all models when none is named). */
  depth(model?: string): number {
    let total = 0;
    for (const queue of this.queues.values()) if (!model || queue.model === model) total += queue.items.length;
    return total;
  }

  get busy(): number {
    return this.inFlight;
  }

  /** A model's items waiting or in flight. */
  pending(model: string): number {
    return this.depth(model) + (this.modelInFlight.get(model) ?? 0);
  }

  /** Dispatches what can go now: a model's lane has opened. */
  wake(): void {
    this.pump();
    this.checkIdle();
  }

  /** Fails every waiting item of a model (its load failed). */
  failWaiting(model: string, error: unknown): void {
    for (const queue of this.queues.values()) {
      if (queue.model !== model) continue;
      const jobs = new Set(queue.items.map((item) => item.job));
      queue.items = [];
      for (const job of jobs) this.settle(job, error);
    }
    this.checkIdle(model);
  }

  submit(
    model: string,
    inputs: EngineInput[],
    signal?: AbortSignal,
    kind: OutputKind = 'dense',
    priority: Priority = 'interactive',
  ): Promise<JobResult> {
    const queue = this.queueOf(model, kind, priority);
    if (!queue) return Promise.reject(new ApiError('model_not_found', `The model "${model}" is not served here.`));
    if (this.closed) return Promise.reject(new ApiError('shutting_down'));
    if (signal?.aborted) return Promise.reject(new ApiError('client_closed'));
    if (inputs.length === 0) {
      const ragged =
        kind === 'dense'
          ? {}
          : { counts: new Int32Array(0), ...(kind === 'sparse' ? { indices: new Int32Array(0) } : {}) };
      return Promise.resolve({
        output: new Float32Array(0),
        width: 0,
        ...ragged,
        queueMs: 0,
        loadMs: 0,
        inferenceMs: 0,
        batches: 0,
      });
    }
    if (queue.items.length + inputs.length > this.options.queueCapacity && queue.items.length > 0) {
      const seconds = Math.min(60, Math.max(1, Math.ceil(queue.items.length / Math.max(this.itemsPerSecond, 1))));
      return Promise.reject(
        new ApiError(
          'overloaded',
          `The queue of "${model}" is full (${queue.items.length} inputs waiting); retry in ${seconds} s.`,
          {
            retryAfterSeconds: seconds,
          },
        ),
      );
    }
    return new Promise<JobResult>((resolve, reject) => {
      const job = new Job(model, kind, priority, inputs.length, resolve, reject);
      if (tracer) job.traceWait(tracer);
      const now = performance.now();
      if (priority === 'interactive') this.lastInteractive = now;
      const items = inputs.map((input, index) => ({
        job,
        index,
        ids: input.ids,
        typeIds: input.typeIds,
        attended: input.attended,
        image: input.image,
        length: input.image?.tokens ?? input.ids.length,
        enqueuedAt: now,
      }));
      // A user's inputs go longest first: the request's last batches are then its shortest, and its
      // batches on the sessions side by side end close together; in input order, a long input
      // dispatched last runs on alone while the other sessions idle. (A bulk job's many batches
      // are about throughput, and keep their order.)
      if (priority === 'interactive') items.sort((a, b) => b.length - a.length || a.index - b.index);
      for (const item of items) queue.items.push(item);
      job.cleanup = onAbort(signal, () => this.cancel(job));
      if (!this.lanes.lane(model)) this.lanes.wanted?.(model);
      this.pump();
    });
  }

  /** Stops taking new work; resolves when everything queued and running has finished. */
  async drain(): Promise<void> {
    this.closed = true;
    if (this.inFlight === 0 && this.depth() === 0) return;
    await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  private cancel(job: Job): void {
    if (job.settled) return;
    const queue = this.queueOf(job.model, job.kind, job.priority)!;
    queue.items = queue.items.filter((item) => item.job !== job);
    this.settle(job, new ApiError('client_closed'));
    // A user's input that held bulk work back may have been the last one waiting.
    this.pump();
    this.checkIdle(job.model);
  }

  private settle(job: Job, error?: unknown): void {
    if (job.settled) return;
    job.settled = true;
    job.cleanup?.();
    job.endWait();
    if (error) {
      job.reject(error);
      return;
    }
    const timing = {
      queueMs: job.queueMs,
      loadMs: job.loadMs,
      inferenceMs: job.inferenceMs,
      ...(job.preprocessMs > 0 ? { preprocessMs: job.preprocessMs } : {}),
      batches: job.batches,
    };
    if (job.kind === 'dense') {
      const output = new Float32Array(job.output.length * job.width);
      for (let i = 0; i < job.output.length; i++) output.set(job.output[i]!, i * job.width);
      job.resolve({ output, width: job.width, ...timing });
      return;
    }
    // Rows of their own lengths: concatenated in input order, with a count per input.
    const stride = job.kind === 'tokens' ? job.width : 1;
    const counts = Int32Array.from(job.output, (row) => row!.length / stride);
    const output = new Float32Array(job.output.reduce((sum, row) => sum + row!.length, 0));
    const indices = job.kind === 'sparse' ? new Int32Array(output.length) : undefined;
    let at = 0;
    job.output.forEach((row, i) => {
      output.set(row!, at);
      indices?.set(job.indices[i]!, at);
      at += row!.length;
    });
    job.resolve({ output, width: job.width, counts, indices, ...timing });
  }

  /** Whether users are about: a request of theirs was submitted or answered within the window. */
  private yielding(now: number): boolean {
    return now - this.lastInteractive < this.bulkYield.windowMs;
  }

  /** Whether a user's input waits for a lane that is open. */
  private interactiveWaiting(): boolean {
    for (const queue of this.queues.values())
      if (queue.priority === 'interactive' && queue.items.length > 0 && this.lanes.lane(queue.model)) return true;
    return false;
  }

  /**
   * Whether a bulk batch may go now, as far as users allow: `true`; `false` while a user's input
   * waits (it goes first); or the time at which it may, once a user's input running or the grace
   * after one has ended, or bulk has been held `maxHoldMs`.
   */
  private bulkMayGo(now: number): boolean | number {
    if (!this.yielding(now)) return true;
    if (this.interactiveWaiting()) return false;
    const { graceMs, maxHoldMs } = this.bulkYield;
    const heldSince = this.bulkHeldSince ?? now;
    if (now - heldSince >= maxHoldMs) return true;
    // The grace starts when the user's input lands (which pumps again).
    if (this.interactiveInFlight > 0) return heldSince + maxHoldMs;
    if (now - this.lastInteractiveLanded >= graceMs) return true;
    return Math.min(this.lastInteractiveLanded + graceMs, heldSince + maxHoldMs);
  }

  /**
   * Of the queues whose lane can take a batch now, the one whose oldest item has waited longest:
   * an interactive queue before any bulk one.
   */
  private nextQueue(now: number): { queue: Queue; lane: Lane } | undefined {
    let best: { queue: Queue; lane: Lane } | undefined;
    let bulkGate: boolean | number | undefined;
    let bulkWaiting = false;
    for (const queue of this.queues.values()) {
      const head = queue.items[0];
      if (!head) continue;
      const bulk = queue.priority === 'bulk';
      bulkWaiting ||= bulk;
      if (best) {
        const bestBulk = best.queue.priority === 'bulk';
        if (bulk && !bestBulk) continue;
        if (bulk === bestBulk && head.enqueuedAt >= best.queue.items[0]!.enqueuedAt) continue;
      }
      const lane = this.lanes.lane(queue.model);
      if (!lane || !this.hasRoom(queue.model, lane)) continue;
      if (bulk) {
        bulkGate ??= this.bulkMayGo(now);
        if (bulkGate !== true) {
          this.bulkHeldSince ??= now;
          if (bulkGate !== false) this.wakeAt(bulkGate, now);
          continue;
        }
        // While users are about, a bulk batch takes a session's running slot only, never its ready
        // one: a user's input then waits for one short bulk batch per session at most.
        if (this.yielding(now) && (this.modelInFlight.get(queue.model) ?? 0) >= lane.sessions) continue;
      } else if (lane.solo && this.interactiveInFlight === 0 && this.bulkInFlight > 0) {
        // Only bulk batches run: they are short, and then this input has every core.
        continue;
      }
      best = { queue, lane };
    }
    if (!bulkWaiting) this.bulkHeldSince = undefined;
    return best;
  }

  /** Pumps again at `at` (performance.now() time), for bulk work held back until then. */
  private wakeAt(at: number, now: number): void {
    if (this.holdTimer) {
      if (this.holdTimer.at <= at) return;
      clearTimeout(this.holdTimer.timer);
    }
    const timer = setTimeout(
      () => {
        this.holdTimer = undefined;
        this.pump();
      },
      Math.max(0, at - now),
    );
    timer.unref?.();
    this.holdTimer = { at, timer };
  }

  /** Two batches per session (one running, one ready), within the server's threads; a lone batch always goes. */
  private hasRoom(model: string, lane: Lane): boolean {
    if ((this.modelInFlight.get(model) ?? 0) >= 2 * lane.sessions) return false;
    return this.inFlight === 0 || this.threadsInFlight + lane.threadsPerSession <= this.options.maxInFlight;
  }

  private pump(): void {
    for (;;) {
      const now = performance.now();
      const next = this.nextQueue(now);
      if (!next) return;
      const { queue, lane } = next;
      const bulk = queue.priority === 'bulk';
      let budget = lane.maxBatchTokens ?? this.options.maxBatchTokens;
      if (bulk && this.yielding(now)) budget = Math.max(1, Math.floor(budget * this.bulkYield.budgetShare));
      const batch = this.formBatch(queue, budget);
      // Alone on the server: bulk inputs still waiting do not count against a user's batch, as none
      // goes while it runs.
      const solo = lane.solo && this.inFlight === 0 && (bulk ? this.depth() : this.interactiveDepth()) === 0;
      this.dispatch(queue, lane, batch, 0, solo);
    }
  }

  /** Users' inputs waiting, all models. */
  private interactiveDepth(): number {
    let total = 0;
    for (const queue of this.queues.values()) if (queue.priority === 'interactive') total += queue.items.length;
    return total;
  }

  /** Takes the oldest item and the waiting items nearest to it in length that fit the token budget. */
  formBatch(queue: Queue, maxBatchTokens: number): Item[] {
    const items = queue.items;
    const anchor = items[0]!;
    const cap = queue.maxBatchSize;
    if (cap === 1 || items.length === 1) {
      items.shift();
      return [anchor];
    }
    const window = Math.min(items.length, lookahead);
    // The candidates nearest the anchor in length first, the earlier first among equals: as keys
    // (distance x lookahead + index) sorted as numbers, which a typed array does natively (half
    // the time of a comparator sort: 32 against 66 µs a batch from a queue of 2,000 inputs).
    const keys = new Float64Array(window - 1);
    for (let i = 1; i < window; i++) keys[i - 1] = Math.abs(items[i]!.length - anchor.length) * lookahead + i;
    keys.sort();

    const taken = new Uint8Array(window);
    taken[0] = 1;
    let count = 1;
    let longest = anchor.length;
    let tokens = anchor.length;
    for (const key of keys) {
      if (count >= cap) break;
      const index = key % lookahead;
      const length = items[index]!.length;
      if (queue.uniformLength && length !== anchor.length) continue;
      const newLongest = Math.max(longest, length);
      const padded = newLongest * (count + 1);
      if (padded > maxBatchTokens) continue;
      if ((tokens + length) / padded < minFill) continue;
      taken[index] = 1;
      count += 1;
      longest = newLongest;
      tokens += length;
    }
    // The batch in queue order; the window's other items close up in one move.
    const batch: Item[] = [];
    let kept = 0;
    for (let i = 0; i < window; i++) {
      if (taken[i]) batch.push(items[i]!);
      else items[kept++] = items[i]!;
    }
    items.splice(kept, window - kept);
    return batch;
  }

  private dispatch(queue: Queue, lane: Lane, batch: Item[], attempt: number, solo = false): void {
    const { model, kind } = queue;
    const now = performance.now();
    let total = 0;
    let longest = 0;
    for (const item of batch) {
      total += item.length;
      longest = Math.max(longest, item.length);
      item.job.queueMs = Math.max(item.job.queueMs, now - item.enqueuedAt);
      if (lane.loadedAt !== undefined && lane.loadedAt > item.enqueuedAt)
        item.job.loadMs = Math.max(item.job.loadMs, lane.loadedAt - item.enqueuedAt);
    }
    // A transferred buffer is gone from this thread: keep the originals for the one retry.
    const images = batch[0]!.image
      ? batch.map((item) => (attempt === 0 ? item.image!.bytes.slice() : item.image!.bytes))
      : undefined;
    // An image's length is the tokens it counts for; it has no ids.
    const ids = new Int32Array(images ? 0 : total);
    const lengths = new Int32Array(batch.length);
    const pairs = batch[0]!.typeIds !== undefined;
    const typeIds = pairs ? new Uint8Array(total) : undefined;
    const attended = batch.some((item) => item.attended !== undefined) ? new Int32Array(batch.length) : undefined;
    let offset = 0;
    batch.forEach((item, row) => {
      if (!images) ids.set(item.ids, offset);
      if (typeIds && item.typeIds) typeIds.set(item.typeIds, offset);
      lengths[row] = item.length;
      if (attended) attended[row] = item.attended ?? item.length;
      offset += item.length;
    });

    const span = tracer ? this.traceBatch(tracer, queue, lane, batch, total, longest * batch.length, solo) : undefined;
    if (span && attempt === 0) this.countDispatched(batch, span);

    const bulk = queue.priority === 'bulk';
    this.inFlight += 1;
    this.threadsInFlight += lane.threadsPerSession;
    this.modelInFlight.set(model, (this.modelInFlight.get(model) ?? 0) + 1);
    if (bulk) {
      this.bulkInFlight += 1;
      this.bulkHeldSince = undefined;
    } else this.interactiveInFlight += 1;
    const landed = () => {
      this.inFlight -= 1;
      this.threadsInFlight -= lane.threadsPerSession;
      this.modelInFlight.set(model, this.modelInFlight.get(model)! - 1);
      if (bulk) this.bulkInFlight -= 1;
      else {
        this.interactiveInFlight -= 1;
        this.lastInteractive = this.lastInteractiveLanded = performance.now();
      }
    };
    const started = performance.now();
    lane
      .run({
        model,
        ids,
        lengths,
        typeIds,
        solo,
        ...(kind === 'dense' ? {} : { kind }),
        ...(attended ? { attended } : {}),
        ...(images ? { images } : {}),
      })
      .then(
        (result) => {
          landed();
          if (span) endBatchSpan(span, result);
          this.recordThroughput(lane, batch.length, performance.now() - started);
          this.observer.onBatch?.(model, {
            size: batch.length,
            tokens: total,
            paddedTokens: longest * batch.length,
            inferenceMs: result.inferenceMs,
            device: lane.device,
          });
          const jobs = new Set<Job>();
          // Where each row starts in a ragged result (sparse: entries; tokens: vectors of `width`).
          const stride = kind === 'tokens' ? result.width : 1;
          let start = 0;
          batch.forEach((item, row) => {
            const job = item.job;
            const count = result.counts?.[row] ?? 0;
            const from = start;
            start += count * stride;
            if (job.settled) return;
            const failed = result.rowErrors?.[row];
            if (failed !== undefined) {
              // An image the worker could not decode fails its own request, not its batch neighbours'.
              const param = item.image?.param ?? 'input';
              this.settle(job, new ApiError('invalid_image', `${param}: ${failed}`, { param }));
              return;
            }
            job.width = result.width;
            if (kind === 'dense')
              job.output[item.index] = result.output.subarray(row * result.width, (row + 1) * result.width);
            else {
              job.output[item.index] = result.output.subarray(from, from + count * stride);
              if (result.indices) job.indices[item.index] = result.indices.subarray(from, from + count);
            }
            job.remaining -= 1;
            jobs.add(job);
          });
          for (const job of jobs) {
            job.inferenceMs += result.inferenceMs;
            job.preprocessMs += result.preprocess?.ms ?? 0;
            job.batches += 1;
            if (job.remaining === 0) this.settle(job);
          }
          this.pump();
          this.checkIdle(model);
        },
        (error: unknown) => {
          landed();
          if (span) {
            failed(span, error);
            span.end();
          }
          const live = batch.filter((item) => !item.job.settled);
          const retryLane = this.lanes.lane(model);
          if (attempt === 0 && live.length > 0 && !this.closed && retryLane) {
            // A worker may have died under this batch; the lane has replaced it, so try once more.
            this.dispatch(queue, retryLane, live, 1);
          } else {
            const failure = new ApiError('internal', 'Inference failed.', { cause: error });
            for (const item of live) this.settle(item.job, failure);
            this.pump();
          }
          this.checkIdle(model);
        },
      );
  }

  /**
   * The batch's span: a child of the first request it serves, linked to every request it serves
   * (a batch serves several; each request's queue wait links back to it).
   */
  private traceBatch(
    active: Tracer,
    queue: Queue,
    lane: Lane,
    batch: Item[],
    tokens: number,
    paddedTokens: number,
    solo: boolean,
  ): Span {
    const callers = batch.map((item) => item.job.caller);
    const first = callers.find((caller) => caller !== undefined);
    return active.startSpan(
      `inference ${queue.model}`,
      {
        links: linksTo(callers),
        attributes: {
          'gen_ai.request.model': queue.model,
          'onnx_gateway.batch.size': batch.length,
          'onnx_gateway.batch.tokens': tokens,
          'onnx_gateway.batch.padded_tokens': paddedTokens,
          'onnx_gateway.batch.requests': new Set(batch.map((item) => item.job)).size,
          'onnx_gateway.output': queue.kind,
          'onnx_gateway.priority': queue.priority,
          'onnx_gateway.device': lane.device,
          'onnx_gateway.solo': solo,
        },
      },
      first ? trace.setSpanContext(context.active(), first) : context.active(),
    );
  }

  /** Each job's share of a batch left its queue (a batch holds a job's items in no particular order). */
  private countDispatched(batch: Item[], span: Span): void {
    const counts = new Map<Job, number>();
    for (const item of batch) counts.set(item.job, (counts.get(item.job) ?? 0) + 1);
    for (const [job, count] of counts) job.dispatched(count, span);
  }

  private recordThroughput(lane: Lane, items: number, ms: number): void {
    const rate = (items * lane.sessions * 1000) / Math.max(ms, 0.001);
    this.itemsPerSecond = this.itemsPerSecond === 0 ? rate : 0.9 * this.itemsPerSecond + 0.1 * rate;
  }

  /** Tells the lanes when `model` has nothing left; resolves drain() when the server has nothing left. */
  private checkIdle(model?: string): void {
    if (model !== undefined && this.pending(model) === 0) this.lanes.idle?.(model);
    if (this.inFlight === 0 && this.depth() === 0 && this.idleWaiters.length > 0) {
      for (const resolve of this.idleWaiters.splice(0)) resolve();
    }
  }
}

/** A batch's span closes with what the worker reports: inference time, and a vision tower's image preprocessing as a child. */
function endBatchSpan(span: Span, result: BatchResult): void {
  span.setAttribute('onnx_gateway.inference_ms', result.inferenceMs);
  const preprocess = result.preprocess;
  if (preprocess && tracer) {
    const parent = trace.setSpan(context.active(), span);
    tracer
      .startSpan('image preprocess', { startTime: preprocess.startedAt }, parent)
      .end(preprocess.startedAt + preprocess.ms);
  }
  if (result.rowErrors) span.setAttribute('onnx_gateway.batch.failed_rows', Object.keys(result.rowErrors).length);
  span.end();
}
