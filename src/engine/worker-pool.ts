/**
 * A fixed set of worker threads that run tasks, each thread its tasks one after another.
 *
 * A thread may hold more than one task (`tasksPerThread`): the next one then waits in the thread's
 * own message queue and starts the moment the running one ends, with no round trip through the
 * main thread; the main thread is woken once per result. Tasks beyond what the threads hold wait
 * here, in order, and go to the first thread with room. With `rebalance`, a task waiting in a
 * thread is taken back for a thread that has run dry, if it has not started (worker/claims.ts). A
 * thread that dies fails the tasks it held (the caller decides whether to retry) and is replaced;
 * one that fails while starting is not.
 *
 * Hand-written rather than piscina: per task it costs the main thread one message each way and no
 * more, which the embeddings path pays for every batch (see docs/performance.md).
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { StartupError } from '../errors.js';
import { claimFree, claimQueued, claimTaken } from '../worker/claims.js';
import type { ClaimsMessage, CloseMessage, TaskMessage, ThreadMessage } from '../worker/messages.js';

/**
 * The worker's JavaScript file. Built code finds it beside itself; when the sources run as
 * TypeScript (the test runner), workers still run the built JavaScript, which `npm test` builds first.
 */
export function workerFile(name = 'index.js'): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const beside = join(here, '..', 'worker', name);
  if (existsSync(beside)) return beside;
  const built = join(here, '..', '..', 'dist', 'worker', name);
  if (existsSync(built)) return built;
  throw new Error(`The worker script is missing (${built}): run "npm run build" first.`);
}

/** A thread could not open its models. */
export class WorkerStartError extends StartupError {
  override name = 'WorkerStartError';
  readonly code = 'worker_start';
}

export interface WorkerPoolOptions {
  /** The thread's script (see worker/index.ts). */
  file: string;
  threads: number;
  tasksPerThread: number;
  workerData: unknown;
  /**
   * A task sent to wait behind another goes as a copy (its buffers cloned, not handed over), so that
   * a thread that runs dry can take it over before it starts: without it, the last batches of a lone
   * request could wait behind others while sessions idle. For tasks whose buffers are small.
   */
  rebalance?: boolean;
}

interface Pending {
  id: number;
  task: unknown;
  transfer: ArrayBuffer[];
  resolve: (result: unknown) => void;
  reject: (error: Error) => void;
  /** Its cell in the thread's claims, while it waits there behind another task and may be taken back. */
  claim?: number;
}

interface Thread {
  worker: Worker;
  held: Map<number, Pending>;
  ready: boolean;
  /** Settles the promise of this thread's start. */
  started: { resolve: (report: unknown) => void; reject: (error: Error) => void };
  /** Resolves once the thread has released its sessions (or ended), when closing. */
  released?: () => void;
  /** With `rebalance`: the cells of the tasks waiting in it (worker/claims.ts). */
  claims?: Int32Array;
}

export class WorkerPool<Ready = unknown> {
  private readonly threads = new Set<Thread>();
  private readonly waiting: Pending[] = [];
  private nextId = 1;
  private closing = false;
  private idleWaiters: (() => void)[] = [];
  private rebalancing = false;
  /** Threads being started (by the constructor or grow); close waits for them. */
  private starting: Promise<unknown> = Promise.resolve();
  /** Resolves with each thread's start-up report once every thread has started; rejects if one fails. */
  readonly ready: Promise<Ready[]>;
  /** Threads started to replace threads that died. */
  restarts = 0;

  constructor(private readonly options: WorkerPoolOptions) {
    this.ready = this.startThreads(options.threads);
  }

  /** Threads running or starting. */
  get size(): number {
    return this.threads.size;
  }

  /** Starts `count` more threads; resolves with their reports once they have started. */
  grow(count: number): Promise<Ready[]> {
    if (this.closing) return Promise.reject(new Error('The worker pool is closed.'));
    return this.startThreads(count);
  }

  private startThreads(count: number): Promise<Ready[]> {
    const started = Promise.all(Array.from({ length: count }, () => this.spawn() as Promise<Ready>));
    // Should one fail, the others still end their start before the pool may close.
    const settled = Promise.allSettled([this.starting, started]);
    this.starting = settled;
    started.catch(() => undefined);
    return started;
  }

  /** Tasks waiting for a thread (not those a thread holds). */
  get queueSize(): number {
    return this.waiting.length;
  }

  run<Result>(task: unknown, transfer: ArrayBuffer[] = []): Promise<Result> {
    if (this.closing) return Promise.reject(new Error('The worker pool is closed.'));
    return new Promise<Result>((resolve, reject) => {
      this.waiting.push({ id: this.nextId++, task, transfer, resolve: resolve as (result: unknown) => void, reject });
      this.distribute();
    });
  }

  /** Lets held and waiting tasks finish, then ends the threads. */
  async close(): Promise<void> {
    this.closing = true;
    // Ending a thread while ONNX Runtime is inside a run (its start-up included) aborts the whole
    // process, so wait for start-up and for every task first.
    await this.starting;
    if (this.busy) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    // Each thread releases its sessions before it is ended: a WebGPU session that ends with its
    // thread while another thread's session runs crashes the process too.
    await Promise.all([...this.threads].filter((thread) => thread.ready).map((thread) => this.release(thread)));
    await Promise.all([...this.threads].map((thread) => thread.worker.terminate()));
    this.threads.clear();
  }

  private release(thread: Thread): Promise<void> {
    return new Promise<void>((resolve) => {
      thread.released = resolve;
      thread.worker.postMessage({ close: true } satisfies CloseMessage);
    });
  }

  private get busy(): boolean {
    if (this.waiting.length > 0) return true;
    for (const thread of this.threads) if (thread.held.size > 0) return true;
    return false;
  }

  private checkIdle(): void {
    if (this.idleWaiters.length > 0 && !this.busy) for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  private spawn(): Promise<unknown> {
    const worker = new Worker(this.options.file, { workerData: this.options.workerData });
    let started!: Thread['started'];
    const promise = new Promise<unknown>((resolve, reject) => {
      started = { resolve, reject };
    });
    promise.catch(() => undefined);
    const thread: Thread = { worker, held: new Map(), ready: false, started };
    if (this.options.rebalance && this.options.tasksPerThread > 1) {
      thread.claims = new Int32Array(new SharedArrayBuffer(4 * this.options.tasksPerThread));
      worker.postMessage({ claims: thread.claims } satisfies ClaimsMessage);
    }
    this.threads.add(thread);
    worker.on('message', (message: ThreadMessage) => this.onMessage(thread, message));
    worker.on('error', (error) => this.onExit(thread, error));
    worker.on('exit', (code) => this.onExit(thread, new Error(`The worker thread exited with code ${code}.`)));
    return promise;
  }

  private onMessage(thread: Thread, message: ThreadMessage): void {
    if ('id' in message) {
      const pending = thread.held.get(message.id);
      if (!pending) return;
      thread.held.delete(message.id);
      if (pending.claim !== undefined) Atomics.store(thread.claims!, pending.claim, claimFree);
      if ('error' in message)
        pending.reject(Object.assign(new Error(message.error), { name: message.name ?? 'Error' }));
      else pending.resolve(message.result);
      this.distribute();
      if (thread.held.size === 0) this.rebalanceSoon();
      this.checkIdle();
      return;
    }
    if ('failed' in message) {
      thread.started.reject(new Error(message.failed));
      return;
    }
    if ('closed' in message) {
      thread.released?.();
      return;
    }
    thread.ready = true;
    thread.started.resolve(message.ready);
    this.distribute();
  }

  private onExit(thread: Thread, error: Error): void {
    thread.released?.();
    if (!this.threads.delete(thread)) return;
    for (const pending of thread.held.values()) pending.reject(error);
    thread.held.clear();
    // A thread that can not start would fail the same way again; none is started while closing.
    if (!thread.ready) thread.started.reject(error);
    else if (!this.closing) {
      this.restarts += 1;
      void this.spawn();
    }
    // With no thread left, what waits would wait for ever.
    if (this.threads.size === 0) for (const pending of this.waiting.splice(0)) pending.reject(error);
    this.checkIdle();
  }

  /** Hands waiting tasks to the ready threads that hold the fewest, up to `tasksPerThread` each. */
  private distribute(): void {
    while (this.waiting.length > 0) {
      let best: Thread | undefined;
      for (const thread of this.threads) {
        if (thread.ready && this.hasRoom(thread) && (!best || thread.held.size < best.held.size)) best = thread;
      }
      if (!best) return;
      this.send(best, this.waiting.shift()!);
    }
  }

  private hasRoom(thread: Thread): boolean {
    if (thread.held.size >= this.options.tasksPerThread) return false;
    return thread.held.size === 0 || !thread.claims || freeCell(thread.claims) >= 0;
  }

  /** A task behind another goes as a copy with a claim, to be taken back should a thread run dry. */
  private send(thread: Thread, pending: Pending): void {
    if (thread.held.size > 0 && thread.claims) {
      pending.claim = freeCell(thread.claims);
      Atomics.store(thread.claims, pending.claim, claimQueued);
    }
    thread.held.set(pending.id, pending);
    const message: TaskMessage = { id: pending.id, task: pending.task, claim: pending.claim };
    thread.worker.postMessage(message, pending.claim === undefined ? pending.transfer : []);
  }

  /**
   * Once the caller has had its turn to send more work (its handlers of the result that freed a
   * thread run first), moves tasks waiting behind others to the threads that still have none.
   */
  private rebalanceSoon(): void {
    if (!this.options.rebalance || this.rebalancing || this.waiting.length > 0) return;
    this.rebalancing = true;
    setImmediate(() => {
      this.rebalancing = false;
      if (this.waiting.length === 0) this.rebalance();
    });
  }

  private rebalance(): void {
    for (const idle of this.threads) {
      while (idle.ready && idle.held.size === 0) {
        const taken = this.lastQueued();
        if (!taken) return;
        const { from, pending } = taken;
        // Unless its thread has started it meanwhile: then it stays there.
        if (Atomics.compareExchange(from.claims!, pending.claim!, claimQueued, claimTaken) !== claimQueued) continue;
        from.held.delete(pending.id);
        pending.claim = undefined;
        this.send(idle, pending);
      }
    }
  }

  /** Of the tasks waiting in threads that may be taken back, the one sent last: its thread is the likeliest to be busy longest. */
  private lastQueued(): { from: Thread; pending: Pending } | undefined {
    let last: { from: Thread; pending: Pending } | undefined;
    for (const thread of this.threads)
      for (const pending of thread.held.values())
        if (
          pending.claim !== undefined &&
          (!last || pending.id > last.pending.id) &&
          Atomics.load(thread.claims!, pending.claim) === claimQueued
        )
          last = { from: thread, pending };
    return last;
  }
}

/** A cell of a thread's claims that no task of it holds, or -1. */
function freeCell(claims: Int32Array): number {
  for (let cell = 0; cell < claims.length; cell++) if (Atomics.load(claims, cell) === claimFree) return cell;
  return -1;
}
