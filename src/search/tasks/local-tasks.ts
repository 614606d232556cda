/**
 * Search tasks in one process: created pending, run by a bounded number of slots in creation
 * order, finished as succeeded, failed or cancelled. Records are kept for the retention period and
 * belong to the owner that created them (another owner sees nothing, as if the task did not exist).
 *
 * After a restart, tasks that were running are marked failed (their provider call is gone) and
 * pending tasks are run: nothing had started for them yet.
 */
import { context, ROOT_CONTEXT, type Context } from '@opentelemetry/api';
import { ApiError } from '../../errors.js';
import { tracer } from '../../tracing/spans.js';
import { durationSamples, newTask, TaskServiceBase, type SearchTasksOptions, type TaskView } from './task-base.js';
import type { LocalTaskStore } from './task-store.js';
import { finalStates, type SearchProvider, type SearchRequest, type StoredTask } from '../types.js';

export type { SearchTasksOptions, TaskService, TaskView } from './task-base.js';

export class SearchTasks extends TaskServiceBase {
  private readonly queue: string[] = [];
  private readonly running = new Map<string, AbortController>();
  /** While traced: the context of the request that created each queued task, which its run continues. */
  private readonly origins = new Map<string, Context>();
  private sweepTimer: NodeJS.Timeout | undefined;
  private closed = false;

  private constructor(
    protected override readonly store: LocalTaskStore,
    provider: SearchProvider,
    options: SearchTasksOptions,
  ) {
    super(store, provider, options);
  }

  /** Opens the task service on a store: recovers from a previous run, then starts the slots. */
  static async open(
    store: LocalTaskStore,
    provider: SearchProvider,
    options: SearchTasksOptions,
  ): Promise<SearchTasks> {
    const tasks = new SearchTasks(store, provider, options);
    const now = Date.now();
    await store.failRunning(now, {
      code: 'interrupted',
      message: 'The server restarted while this task was running; create the task again.',
    });
    await store.deleteFinishedBefore(now - options.retentionMs);
    tasks.durations = await store.recentDurations(durationSamples);
    tasks.queue.push(...(await store.pendingIds()));
    tasks.sweepTimer = setInterval(() => void tasks.sweep(), Math.min(options.retentionMs, 60_000));
    tasks.sweepTimer.unref();
    tasks.pump();
    return tasks;
  }

  async create(owner: string, request: SearchRequest): Promise<TaskView> {
    if (this.closed) throw new ApiError('shutting_down');
    if (this.queue.length >= this.options.maxPending) {
      throw new ApiError('overloaded', `${this.queue.length} search tasks are waiting; retry later.`, {
        retryAfterSeconds: Math.max(1, this.estimate(this.running.size + this.queue.length, this.options.concurrency)),
      });
    }
    const task = newTask(owner, request);
    await this.store.insert(task);
    this.queue.push(task.id);
    if (tracer) this.origins.set(task.id, context.active());
    const view = await this.view(task);
    this.pump();
    return view;
  }

  async cancel(owner: string, id: string): Promise<TaskView | undefined> {
    const task = await this.get(owner, id);
    if (!task || finalStates.has(task.state)) return task;
    const index = this.queue.indexOf(id);
    if (index >= 0) this.queue.splice(index, 1);
    this.origins.delete(id);
    if (
      await this.store.finish(id, 'cancelled', Date.now(), null, {
        code: 'cancelled',
        message: 'The task was cancelled.',
      })
    ) {
      this.running.get(id)?.abort(new ApiError('client_closed', 'The task was cancelled.'));
      this.notify(id);
    }
    return this.get(owner, id);
  }

  /** Stops taking tasks, aborts running ones (they fail) and closes the store. Pending tasks stay pending. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.sweepTimer);
    const stopped = [...this.running.keys()].map((id) => new Promise<void>((resolve) => this.onceDone(id, resolve)));
    for (const controller of this.running.values())
      controller.abort(new ApiError('shutting_down', 'The server shut down while this task was running.'));
    await Promise.all(stopped);
    await this.provider.close?.();
    await this.store.close();
  }

  protected async view(task: StoredTask): Promise<TaskView> {
    let estimateWaitSeconds = 0;
    if (task.state === 'pending') {
      const position = this.queue.indexOf(task.id);
      estimateWaitSeconds = this.estimate(
        this.running.size + (position < 0 ? this.queue.length : position),
        this.options.concurrency,
      );
    } else if (task.state === 'running') {
      estimateWaitSeconds = this.runningEstimate(task);
    }
    return { ...task, estimateWaitSeconds };
  }

  private pump(): void {
    while (!this.closed && this.running.size < this.options.concurrency && this.queue.length > 0) {
      const id = this.queue.shift()!;
      const controller = new AbortController();
      this.running.set(id, controller);
      // Started when a slot frees, maybe by another task's end: run in the creating request's trace.
      const origin = this.origins.get(id);
      this.origins.delete(id);
      const run = () => this.execute(id, controller);
      void (tracer ? context.with(origin ?? ROOT_CONTEXT, run) : run())
        .then((ms) => {
          if (ms === undefined) return;
          this.durations.unshift(ms);
          this.durations.length = Math.min(this.durations.length, durationSamples);
        })
        .finally(() => {
          this.running.delete(id);
          this.notify(id);
          this.pump();
        });
    }
  }

  private async sweep(): Promise<void> {
    try {
      await this.store.deleteFinishedBefore(Date.now() - this.options.retentionMs);
    } catch (error) {
      this.options.log?.error({ err: error }, 'search task sweep failed');
    }
  }
}
