/**
 * Search tasks: created pending, run by a bounded number of slots in creation order, finished as
 * succeeded, failed or cancelled. Records are kept for the retention period and belong to the
 * owner that created them (another owner sees nothing, as if the task did not exist).
 *
 * After a restart, tasks that were running are marked failed (their provider call is gone) and
 * pending tasks are run: nothing had started for them yet.
 */
import { randomUUID } from 'node:crypto';
import { ApiError, isApiError } from '../../errors.js';
import type { TaskStore } from './task-store.js';
import { finalStates, type SearchProvider, type SearchRequest, type StoredTask, type TaskError } from './types.js';

export interface SearchTasksOptions {
  /** Tasks run at once. */
  concurrency: number;
  /** How long finished records are kept, in ms. */
  retentionMs: number;
  /** Longest a task may run before it fails with `timeout`, in ms. */
  taskTimeoutMs: number;
  /** Pending tasks accepted before new ones are refused with `overloaded`. */
  maxPending: number;
  log?: { error(object: unknown, message: string): void };
}

export interface TaskView extends StoredTask {
  estimateWaitSeconds: number;
}

/** Assumed run time before any task has finished. */
const defaultDurationMs = 2000;
const durationSamples = 20;

export class SearchTasks {
  private readonly queue: string[] = [];
  private readonly running = new Map<string, AbortController>();
  private readonly waiters = new Map<string, Set<() => void>>();
  private durations: number[] = [];
  private sweepTimer: NodeJS.Timeout | undefined;
  private closed = false;

  private constructor(
    private readonly store: TaskStore,
    private readonly provider: SearchProvider,
    private readonly options: SearchTasksOptions,
  ) {}

  /** Opens the task service on a store: recovers from a previous run, then starts the slots. */
  static async open(store: TaskStore, provider: SearchProvider, options: SearchTasksOptions): Promise<SearchTasks> {
    const tasks = new SearchTasks(store, provider, options);
    const now = Date.now();
    await store.failRunning(now, { code: 'interrupted', message: 'The server restarted while this task was running; create the task again.' });
    await store.deleteFinishedBefore(now - options.retentionMs);
    tasks.durations = await store.recentDurations(durationSamples);
    tasks.queue.push(...(await store.pendingIds()));
    tasks.sweepTimer = setInterval(() => void tasks.sweep(), Math.min(options.retentionMs, 60_000));
    tasks.sweepTimer.unref();
    tasks.pump();
    return tasks;
  }

  get providerName(): string {
    return this.provider.name;
  }

  async create(owner: string, request: SearchRequest): Promise<TaskView> {
    if (this.closed) throw new ApiError('shutting_down');
    if (this.queue.length >= this.options.maxPending) {
      throw new ApiError('overloaded', `${this.queue.length} search tasks are waiting; retry later.`, {
        headers: { 'retry-after': String(Math.max(1, this.estimate(this.queue.length))) },
      });
    }
    const task: StoredTask = {
      id: randomUUID(),
      owner,
      state: 'pending',
      request,
      createdAt: Date.now(),
      startedAt: null,
      finishedAt: null,
      outcome: null,
      error: null,
    };
    await this.store.insert(task);
    this.queue.push(task.id);
    const view = this.view(task);
    this.pump();
    return view;
  }

  /** The task, if it exists, is still retained and belongs to `owner`. */
  async get(owner: string, id: string): Promise<TaskView | undefined> {
    const task = await this.store.get(id);
    if (!task || task.owner !== owner) return undefined;
    if (task.finishedAt !== null && task.finishedAt < Date.now() - this.options.retentionMs) return undefined;
    return this.view(task);
  }

  /** Like get, but waits up to `waitMs` for the task to reach a final state. */
  async wait(owner: string, id: string, waitMs: number, signal?: AbortSignal): Promise<TaskView | undefined> {
    if (waitMs <= 0) return this.get(owner, id);
    // Listen before looking, so a task finishing in between is not missed.
    let done!: () => void;
    const finished = new Promise<void>((resolve) => (done = resolve));
    this.onceDone(id, done);
    const timer = setTimeout(done, waitMs);
    signal?.addEventListener('abort', done, { once: true });
    try {
      const first = await this.get(owner, id);
      if (!first || finalStates.has(first.state)) return first;
      await finished;
      return await this.get(owner, id);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      const set = this.waiters.get(id);
      set?.delete(done);
      if (set?.size === 0) this.waiters.delete(id);
    }
  }

  /** Cancels a pending or running task; a finished task is left as it is. */
  async cancel(owner: string, id: string): Promise<TaskView | undefined> {
    const task = await this.get(owner, id);
    if (!task || finalStates.has(task.state)) return task;
    const index = this.queue.indexOf(id);
    if (index >= 0) this.queue.splice(index, 1);
    if (await this.store.finish(id, 'cancelled', Date.now(), null, { code: 'cancelled', message: 'The task was cancelled.' })) {
      this.running.get(id)?.abort(new ApiError('client_closed', 'The task was cancelled.'));
      this.notify(id);
    }
    return this.get(owner, id);
  }

  /** Answers every long-poll now (the server is about to close). */
  wakeWaiters(): void {
    for (const id of [...this.waiters.keys()]) this.notify(id);
  }

  /** Stops taking tasks, aborts running ones (they fail) and closes the store. Pending tasks stay pending. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.sweepTimer);
    const stopped = [...this.running.keys()].map((id) => new Promise<void>((resolve) => this.onceDone(id, resolve)));
    for (const controller of this.running.values()) controller.abort(new ApiError('shutting_down', 'The server shut down while this task was running.'));
    await Promise.all(stopped);
    await this.provider.close?.();
    await this.store.close();
  }

  private view(task: StoredTask): TaskView {
    let estimateWaitSeconds = 0;
    if (task.state === 'pending') {
      const position = this.queue.indexOf(task.id);
      estimateWaitSeconds = this.estimate(position < 0 ? this.queue.length : position);
    } else if (task.state === 'running' && task.startedAt !== null) {
      estimateWaitSeconds = Math.max(0, Math.ceil((this.averageMs() - (Date.now() - task.startedAt)) / 1000));
    }
    return { ...task, estimateWaitSeconds };
  }

  /** Seconds until a task with `ahead` pending tasks before it finishes, from recent run times. */
  private estimate(ahead: number): number {
    const rounds = (this.running.size + ahead) / this.options.concurrency;
    return Math.ceil(((rounds + 1) * this.averageMs()) / 1000);
  }

  private averageMs(): number {
    if (this.durations.length === 0) return defaultDurationMs;
    return this.durations.reduce((a, b) => a + b, 0) / this.durations.length;
  }

  private pump(): void {
    while (!this.closed && this.running.size < this.options.concurrency && this.queue.length > 0) {
      const id = this.queue.shift()!;
      const controller = new AbortController();
      this.running.set(id, controller);
      void this.run(id, controller).finally(() => {
        this.running.delete(id);
        this.notify(id);
        this.pump();
      });
    }
  }

  private async run(id: string, controller: AbortController): Promise<void> {
    try {
      const startedAt = Date.now();
      if (!(await this.store.markRunning(id, startedAt))) return;
      const task = await this.store.get(id);
      if (!task) return;
      const timeout = AbortSignal.timeout(this.options.taskTimeoutMs);
      const signal = AbortSignal.any([controller.signal, timeout]);
      let finished: boolean;
      try {
        const outcome = await this.provider.search(task.request, signal);
        if (signal.aborted) throw signal.reason;
        finished = await this.store.finish(id, 'succeeded', Date.now(), outcome, null);
      } catch (error) {
        const reason = controller.signal.aborted ? controller.signal.reason : timeout.aborted ? 'timeout' : error;
        finished = await this.store.finish(id, 'failed', Date.now(), null, this.taskError(reason, id));
      }
      if (finished) {
        this.durations.unshift(Date.now() - startedAt);
        this.durations.length = Math.min(this.durations.length, durationSamples);
      }
    } catch (error) {
      this.options.log?.error({ err: error, task: id }, 'search task store failed');
    }
  }

  private taskError(error: unknown, id: string): TaskError {
    if (error === 'timeout') return { code: 'timeout', message: `The search took longer than ${this.options.taskTimeoutMs} ms.` };
    if (isApiError(error)) return { code: error.code, message: error.message };
    this.options.log?.error({ err: error, task: id }, 'search task failed');
    return { code: 'internal', message: 'Internal error while searching.' };
  }

  private onceDone(id: string, callback: () => void): void {
    let set = this.waiters.get(id);
    if (!set) this.waiters.set(id, (set = new Set()));
    set.add(callback);
  }

  private notify(id: string): void {
    const set = this.waiters.get(id);
    if (!set) return;
    this.waiters.delete(id);
    for (const callback of set) callback();
  }

  private async sweep(): Promise<void> {
    try {
      await this.store.deleteFinishedBefore(Date.now() - this.options.retentionMs);
    } catch (error) {
      this.options.log?.error({ err: error }, 'search task sweep failed');
    }
  }
}
