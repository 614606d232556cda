/**
 * What every search task service shares, whether its queue is in this process (SearchTasks) or in
 * Redis for several replicas (SharedSearchTasks): running one task against the provider with its
 * time limit, turning failures into task errors, long-polls, and the run-time average behind
 * `estimate_wait_seconds`.
 */
import { randomUUID } from 'node:crypto';
import { onAbort } from '../../abort.js';
import { isApiError } from '../../errors.js';
import { inSpan, tracer } from '../../tracing/spans.js';
import type { TaskStore } from './task-store.js';
import { finalStates, type SearchProvider, type SearchRequest, type StoredTask, type TaskError } from '../types.js';

export interface SearchTasksOptions {
  /** Tasks run at once (per replica when shared). */
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

/** The operations the HTTP layer uses. */
export interface TaskService {
  readonly providerName: string;
  create(owner: string, request: SearchRequest): Promise<TaskView>;
  /** The task, if it exists, is still retained and belongs to `owner`. */
  get(owner: string, id: string): Promise<TaskView | undefined>;
  /** Like get, but waits up to `waitMs` for the task to reach a final state. */
  wait(owner: string, id: string, waitMs: number, signal?: AbortSignal): Promise<TaskView | undefined>;
  /** Cancels a pending or running task; a finished task is left as it is. */
  cancel(owner: string, id: string): Promise<TaskView | undefined>;
  /** Answers every long-poll now (the server is about to close). */
  wakeWaiters(): void;
  close(): Promise<void>;
}

/** A new task record: pending, owned by `owner`. */
export function newTask(owner: string, request: SearchRequest): StoredTask {
  return {
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
}

/** Assumed run time before any task has finished. */
const defaultDurationMs = 2000;
export const durationSamples = 20;

export abstract class TaskServiceBase implements TaskService {
  private readonly waiters = new Map<string, Set<() => void>>();
  protected durations: number[] = [];

  protected constructor(
    protected readonly store: TaskStore,
    protected readonly provider: SearchProvider,
    protected readonly options: SearchTasksOptions,
  ) {}

  get providerName(): string {
    return this.provider.name;
  }

  abstract create(owner: string, request: SearchRequest): Promise<TaskView>;
  abstract cancel(owner: string, id: string): Promise<TaskView | undefined>;
  abstract close(): Promise<void>;
  protected abstract view(task: StoredTask): Promise<TaskView>;

  async get(owner: string, id: string): Promise<TaskView | undefined> {
    const task = await this.store.get(id);
    if (!task || task.owner !== owner) return undefined;
    if (task.finishedAt !== null && task.finishedAt < Date.now() - this.options.retentionMs) return undefined;
    return this.view(task);
  }

  async wait(owner: string, id: string, waitMs: number, signal?: AbortSignal): Promise<TaskView | undefined> {
    if (waitMs <= 0) return this.get(owner, id);
    // Listen before looking, so a task finishing in between is not missed.
    let done!: () => void;
    const finished = new Promise<void>((resolve) => (done = resolve));
    this.onceDone(id, done);
    const timer = setTimeout(done, waitMs);
    const stopListening = onAbort(signal, done);
    try {
      const first = await this.get(owner, id);
      if (!first || finalStates.has(first.state)) return first;
      await finished;
      return await this.get(owner, id);
    } finally {
      clearTimeout(timer);
      stopListening();
      const set = this.waiters.get(id);
      set?.delete(done);
      if (set?.size === 0) this.waiters.delete(id);
    }
  }

  wakeWaiters(): void {
    for (const id of [...this.waiters.keys()]) this.notify(id);
  }

  /**
   * Runs a pending task to its final state: pending -> running, the provider within the time
   * limit, then succeeded or failed. Resolves with the run time when this call finished the task
   * (undefined when it was cancelled or had left "pending" before). Never rejects.
   */
  protected execute(id: string, controller: AbortController): Promise<number | undefined> {
    return tracer
      ? inSpan(
          tracer,
          'search task',
          { 'onnx_gateway.search.task': id, 'onnx_gateway.search.provider': this.provider.name },
          () => this.executeUntraced(id, controller),
        )
      : this.executeUntraced(id, controller);
  }

  private async executeUntraced(id: string, controller: AbortController): Promise<number | undefined> {
    try {
      const startedAt = Date.now();
      if (!(await this.store.markRunning(id, startedAt))) return undefined;
      const task = await this.store.get(id);
      if (!task) return undefined;
      const timeout = AbortSignal.timeout(this.options.taskTimeoutMs);
      const signal = AbortSignal.any([controller.signal, timeout]);
      let finished: boolean;
      try {
        const outcome = await (tracer
          ? inSpan(tracer, `search ${this.provider.name}`, { 'onnx_gateway.search.provider': this.provider.name }, () =>
              this.provider.search(task.request, signal),
            )
          : this.provider.search(task.request, signal));
        if (signal.aborted) throw signal.reason;
        finished = await this.store.finish(id, 'succeeded', Date.now(), outcome, null);
      } catch (error) {
        const reason: unknown = controller.signal.aborted
          ? controller.signal.reason
          : timeout.aborted
            ? 'timeout'
            : error;
        finished = await this.store.finish(id, 'failed', Date.now(), null, this.taskError(reason, id));
      }
      return finished ? Date.now() - startedAt : undefined;
    } catch (error) {
      this.options.log?.error({ err: error, task: id }, 'search task store failed');
      return undefined;
    }
  }

  /** Seconds until a task with `ahead` tasks before it (running ones included) finishes, from recent run times. */
  protected estimate(ahead: number, slots: number): number {
    return Math.ceil(((ahead / Math.max(slots, 1) + 1) * this.averageMs()) / 1000);
  }

  protected averageMs(): number {
    if (this.durations.length === 0) return defaultDurationMs;
    return this.durations.reduce((a, b) => a + b, 0) / this.durations.length;
  }

  protected runningEstimate(task: StoredTask): number {
    if (task.startedAt === null) return 0;
    return Math.max(0, Math.ceil((this.averageMs() - (Date.now() - task.startedAt)) / 1000));
  }

  protected onceDone(id: string, callback: () => void): void {
    let set = this.waiters.get(id);
    if (!set) this.waiters.set(id, (set = new Set()));
    set.add(callback);
  }

  protected notify(id: string): void {
    const set = this.waiters.get(id);
    if (!set) return;
    this.waiters.delete(id);
    for (const callback of set) callback();
  }

  private taskError(error: unknown, id: string): TaskError {
    if (error === 'timeout')
      return { code: 'timeout', message: `The search took longer than ${this.options.taskTimeoutMs} ms.` };
    if (isApiError(error)) return { code: error.code, message: error.message };
    this.options.log?.error({ err: error, task: id }, 'search task failed');
    return { code: 'internal', message: 'Internal error while searching.' };
  }
}
