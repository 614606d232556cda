/**
 * Search tasks shared by several replicas through Redis: records in Redis (RedisTaskStore), the
 * queue a BullMQ queue that every replica works with `concurrency` slots, so a task created
 * through one replica is run by whichever is free and readable through any. Replicas tell each
 * other about finished and cancelled tasks on a pub/sub channel, which wakes long-polls and aborts
 * a cancelled task on the replica running it.
 *
 * A replica that dies while running a task stops renewing the job's lock; another replica's
 * stalled-job check (maxStalledCount 0) puts the job back at the head of the queue marked to fail,
 * and the next replica with a free slot fails it instead of running it. That replica's worker
 * reports the failure locally, and the task ends `failed` with `interrupted` (within about
 * lockMs + stalledCheckMs when a slot is free), as in one process after a restart. Tasks are not
 * re-run: the provider call may have had effects, and a client can create the task again. A
 * replica that shuts down cleanly leaves its pending tasks to the others.
 */
import { Queue, Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { ApiError } from '../../errors.js';
import { probeRedis, throttledErrorLog } from '../../redis.js';
import { processSpan, sendSpan, type TraceCarrier } from '../../tracing/messaging.js';
import { tracer } from '../../tracing/spans.js';
import { RedisTaskStore } from './redis-task-store.js';
import { durationSamples, newTask, TaskServiceBase, type SearchTasksOptions, type TaskView } from './task-base.js';
import { finalStates, type SearchProvider, type SearchRequest, type StoredTask } from '../types.js';

const queueName = 'search';
const keyPrefix = 'onnx-gateway';
const channel = 'onnx-gateway:search:events';
/** How long a running job's lock lasts without renewal, and how often replicas look for stalled jobs. */
const lockMs = 10_000;
const stalledCheckMs = 5_000;

/** A job's data: the task's id, and the trace context of the request that created it when traced. */
interface TaskJob {
  id: string;
  trace?: TraceCarrier;
}

interface TaskEvent {
  type: 'done' | 'cancel';
  id: string;
}

export class SharedSearchTasks extends TaskServiceBase {
  private readonly running = new Map<string, AbortController>();
  private closed = false;
  private worker!: Worker;
  /** Every Redis connection opened here (BullMQ does not close connections it was given). */
  private connections: Redis[] = [];

  private constructor(
    private readonly redis: Redis,
    private readonly queue: Queue,
    protected override readonly store: RedisTaskStore,
    provider: SearchProvider,
    options: SearchTasksOptions,
  ) {
    super(store, provider, options);
  }

  static async open(url: string, provider: SearchProvider, options: SearchTasksOptions): Promise<SharedSearchTasks> {
    await probeRedis(url);
    const onError = throttledErrorLog(options.log);
    // Requests fail fast while Redis is away (503 store_unavailable) rather than queueing forever.
    const redis = new Redis(url, { maxRetriesPerRequest: 2 });
    // BullMQ's worker and the event subscriber block on Redis, so theirs must wait out outages instead.
    const subscriber = new Redis(url, { maxRetriesPerRequest: null });
    const workerConnection = new Redis(url, { maxRetriesPerRequest: null });
    for (const connection of [redis, subscriber, workerConnection]) connection.on('error', onError);
    const queue = new Queue(queueName, { connection: redis, prefix: keyPrefix });
    queue.on('error', onError);
    const tasks = new SharedSearchTasks(
      redis,
      queue,
      new RedisTaskStore(redis, options.retentionMs),
      provider,
      options,
    );
    tasks.connections = [redis, subscriber, workerConnection];

    await subscriber.subscribe(channel);
    subscriber.on('message', (_channel: string, message: string) => tasks.onEvent(message));
    tasks.worker = new Worker(queueName, (job: Job<TaskJob>) => tasks.process(job), {
      connection: workerConnection,
      prefix: keyPrefix,
      concurrency: options.concurrency,
      lockDuration: lockMs,
      stalledInterval: stalledCheckMs,
      maxStalledCount: 0,
    });
    tasks.worker.on('error', onError);
    // Jobs only fail when the replica running them stopped renewing their lock (the processor never
    // throws); the worker that takes such a job next fails it and says so here.
    tasks.worker.on('failed', (job) => void (job?.id && tasks.interrupted(job.id)));
    tasks.durations = await tasks.store.recentDurations(durationSamples);
    return tasks;
  }

  async create(owner: string, request: SearchRequest): Promise<TaskView> {
    if (this.closed) throw new ApiError('shutting_down');
    return this.guard(async () => {
      const waiting = await this.queue.getWaitingCount();
      if (waiting >= this.options.maxPending) {
        const slots = await this.slots();
        throw new ApiError('overloaded', `${waiting} search tasks are waiting; retry later.`, {
          retryAfterSeconds: Math.max(1, this.estimate(waiting, slots)),
        });
      }
      const task = newTask(owner, request);
      await this.store.insert(task);
      try {
        await this.enqueue(task.id);
      } catch (error) {
        // A record with no job would stay pending for ever.
        await this.store.remove(task.id).catch(() => undefined);
        throw error;
      }
      return this.view(task);
    });
  }

  override get(owner: string, id: string): Promise<TaskView | undefined> {
    return this.guard(() => super.get(owner, id));
  }

  async cancel(owner: string, id: string): Promise<TaskView | undefined> {
    return this.guard(async () => {
      const task = await super.get(owner, id);
      if (!task || finalStates.has(task.state)) return task;
      if (
        await this.store.finish(id, 'cancelled', Date.now(), null, {
          code: 'cancelled',
          message: 'The task was cancelled.',
        })
      ) {
        // A waiting job is removed; a running one is locked by its replica, which the event aborts.
        await this.queue.remove(id).catch(() => 0);
        await this.publish({ type: 'cancel', id });
      }
      return super.get(owner, id);
    });
  }

  /** Stops taking tasks and aborts this replica's running ones (they fail); pending tasks stay queued for the others. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Stop taking jobs first, so that no pending task starts here while running ones wind down.
    const closing = this.worker.close();
    for (const controller of this.running.values())
      controller.abort(new ApiError('shutting_down', 'The server shut down while this task was running.'));
    await closing;
    await this.queue.close();
    await Promise.all(this.connections.map((connection) => connection.quit().catch(() => undefined)));
    await this.provider.close?.();
  }

  protected async view(task: StoredTask): Promise<TaskView> {
    let estimateWaitSeconds = 0;
    if (task.state === 'pending') {
      this.durations = await this.store.recentDurations(durationSamples);
      const counts = await this.queue.getJobCounts('active', 'waiting');
      // Position in the queue is not tracked: count every task ahead or beside it.
      estimateWaitSeconds = this.estimate(
        (counts.active ?? 0) + Math.max(0, (counts.waiting ?? 0) - 1),
        await this.slots(),
      );
    } else if (task.state === 'running') {
      this.durations = await this.store.recentDurations(durationSamples);
      estimateWaitSeconds = this.runningEstimate(task);
    }
    return { ...task, estimateWaitSeconds };
  }

  /** Queues a task's job, with the creating request's trace context when traced. */
  private enqueue(id: string): Promise<unknown> {
    const add = (trace?: TraceCarrier) =>
      this.queue.add('search', trace ? { id, trace } : { id }, {
        jobId: id,
        removeOnComplete: true,
        removeOnFail: true,
      });
    return tracer ? sendSpan(tracer, queueName, { messageId: id }, add) : add();
  }

  /** Runs a task's job: in the trace of the request that created it, whichever replica that was. */
  private process(job: Job<TaskJob>): Promise<void> {
    const { id, trace } = job.data;
    return tracer
      ? processSpan(tracer, queueName, { carrier: trace, messageId: id }, () => this.run(id))
      : this.run(id);
  }

  private async run(id: string): Promise<void> {
    const controller = new AbortController();
    this.running.set(id, controller);
    try {
      await this.execute(id, controller);
    } finally {
      this.running.delete(id);
      await this.publish({ type: 'done', id });
    }
  }

  /** A job failed by the stalled-job check: its replica is gone. */
  private async interrupted(id: string): Promise<void> {
    try {
      const error = { code: 'interrupted', message: 'The replica running this task stopped; create the task again.' };
      if (await this.store.finish(id, 'failed', Date.now(), null, error)) await this.publish({ type: 'done', id });
    } catch (err) {
      this.options.log?.error({ err, task: id }, 'search task store failed');
    }
  }

  private onEvent(message: string): void {
    let event: TaskEvent;
    try {
      event = JSON.parse(message) as TaskEvent;
    } catch {
      return;
    }
    if (event.type === 'cancel')
      this.running.get(event.id)?.abort(new ApiError('client_closed', 'The task was cancelled.'));
    this.notify(event.id);
  }

  private async publish(event: TaskEvent): Promise<void> {
    await this.redis
      .publish(channel, JSON.stringify(event))
      .catch((err: unknown) => this.options.log?.error({ err }, 'redis publish failed'));
  }

  /** Task slots over all replicas. */
  private async slots(): Promise<number> {
    const workers = await this.queue.getWorkersCount().catch(() => 1);
    return Math.max(1, workers) * this.options.concurrency;
  }

  /** Redis errors become 503 store_unavailable; errors of the catalogue pass through. */
  private async guard<T>(operation: () => Promise<T>): Promise<T> {
    try {
      return await operation();
    } catch (error) {
      if (error instanceof ApiError) throw error;
      this.options.log?.error({ err: error }, 'search task store failed');
      throw new ApiError('store_unavailable', 'The shared task store (Redis) did not answer; retry later.', {
        cause: error,
      });
    }
  }
}
