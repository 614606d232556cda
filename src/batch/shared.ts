/**
 * Batches shared by replicas through Redis: the records of files and batches in Redis (every
 * replica reads and changes the same ones), the files dir a volume every replica mounts, and the
 * work a BullMQ queue of jobs that every replica takes `batchConcurrency` at a time.
 *
 * A new batch is a `validate` job: whichever replica takes it checks the input, cuts it into
 * chunks of `batchChunkLines` requests and queues a job per chunk. A chunk's answers go to part
 * files of its own run (chunks.ts); its run is recorded in the batch's record by a Lua script that
 * takes the first run of each chunk only, and counts its answers once. The replica that records
 * the last chunk queues `finalize`, which joins the recorded parts in chunk order into the output
 * and error files (written under a temporary name, then renamed) and ends the batch.
 *
 * A replica killed mid-chunk stops renewing its job's lock: after `batchLockSeconds` another
 * replica's stalled-job check puts the job back in the queue and the chunk runs again from its
 * start, elsewhere; the dead run's parts are never recorded. A replica that shuts down puts its
 * running jobs back at once. Every job is safe to run again at any step.
 *
 * Every replica sweeps each minute: files past their `expires_at` are deleted (a deletion is one
 * Lua script, so two replicas sweeping at once delete a file once); a batch past its completion
 * window answers the requests of each chunk not yet run with `batch_expired` and ends `expired`.
 */
import { createReadStream } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { Queue, WaitingError, Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import type { Attributes } from '@opentelemetry/api';
import type { Config } from '../config.js';
import type { CoreContext } from '../core/context.js';
import { ApiError } from '../errors.js';
import { probeRedis, throttledErrorLog } from '../redis.js';
import { processSpan, sendSpan, type TraceCarrier } from '../tracing/messaging.js';
import { tracer } from '../tracing/spans.js';
import type { Batches, CreateBatch, ExpiresAfter, ReceivedFile } from './batches.js';
import { cutChunks, partPath, removeParts, runChunk, type Chunk, type ChunkResult } from './chunks.js';
import { FileStorage, resultFileId } from './files.js';
import { RedisBatchStore } from './redis-store.js';
import { inputInUse, newBatchRecord, seconds, sweepMs, uploadedFile, type Clock } from './requests.js';
import { bulkCore, type BatchLog, type BatchSettings } from './service.js';
import type { Page } from './store.js';
import { finalStatuses, type BatchEndpoints, type BatchRecord, type BatchStatus, type FileRecord } from './types.js';
import { validateInput } from './validate.js';

/** The queue's name and key prefix: its waiting jobs are the list `onnx-gateway:batch-chunks:wait`. */
export const chunkQueueName = 'batch-chunks';
const keyPrefix = 'onnx-gateway';
/** How often a running chunk looks whether its batch was cancelled. */
const cancelCheckMs = 1000;
/** Times a chunk may lose its replica before its job fails. */
const maxStalls = 5;

export type SharedBatchSettings = BatchSettings & Pick<Config, 'batchChunkLines' | 'batchLockSeconds'>;

/** A job: what it does to which batch, and (when traced) the trace context of what queued it. */
type JobData = (
  | { kind: 'validate'; batchId: string }
  | { kind: 'chunk'; batchId: string; chunk: Chunk }
  | { kind: 'finalize'; batchId: string }
) & { trace?: TraceCarrier };

type JobOf<Kind extends JobData['kind']> = Omit<Extract<JobData, { kind: Kind }>, 'trace'>;

const finals = [...finalStatuses];
const expiredError = {
  code: 'batch_expired',
  message: 'This request could not be executed before the completion window expired.',
};
/** The run recorded for a chunk that a cancel skipped: no parts. */
const skipped = (): ChunkResult => ({ token: '', completed: 0, failed: 0, inputTokens: 0 });

export class SharedBatchService implements Batches {
  private readonly running = new Set<AbortController>();
  private closed = false;
  private worker!: Worker<JobData>;
  private connections: Redis[] = [];
  private sweeper?: NodeJS.Timeout;

  private constructor(
    private readonly core: CoreContext,
    private readonly endpoints: BatchEndpoints,
    private readonly settings: SharedBatchSettings,
    private readonly store: RedisBatchStore,
    private readonly queue: Queue<JobData>,
    readonly storage: FileStorage,
    private readonly log?: BatchLog,
    private readonly clock: Clock = seconds,
  ) {}

  static async open(
    url: string,
    core: CoreContext,
    endpoints: BatchEndpoints,
    settings: SharedBatchSettings,
    log?: BatchLog,
    clock?: Clock,
  ): Promise<SharedBatchService> {
    await probeRedis(url);
    const onError = throttledErrorLog(log);
    // Requests fail fast while Redis is away (503) rather than wait; the worker's blocking reads wait it out.
    const redis = new Redis(url, { maxRetriesPerRequest: 2 });
    const workerConnection = new Redis(url, { maxRetriesPerRequest: null });
    for (const connection of [redis, workerConnection]) connection.on('error', onError);
    const queue = new Queue<JobData>(chunkQueueName, {
      connection: redis,
      prefix: keyPrefix,
      defaultJobOptions: {
        removeOnComplete: true,
        removeOnFail: 1000,
        attempts: 5,
        backoff: { type: 'exponential', delay: 2000 },
      },
    });
    queue.on('error', onError);
    const storage = new FileStorage(settings.filesDir ?? join(settings.dataDir, 'files'));
    const service = new SharedBatchService(
      bulkCore(core),
      endpoints,
      settings,
      new RedisBatchStore(redis),
      queue,
      storage,
      log,
      clock,
    );
    service.connections = [redis, workerConnection];
    const lockMs = settings.batchLockSeconds * 1000;
    service.worker = new Worker<JobData>(chunkQueueName, (job, token) => service.process(job, token), {
      connection: workerConnection,
      prefix: keyPrefix,
      concurrency: settings.batchConcurrency,
      lockDuration: lockMs,
      // A dead replica's chunk waits at most lockMs + stalledInterval before it runs elsewhere.
      stalledInterval: lockMs / 2,
      maxStalledCount: maxStalls,
    });
    service.worker.on('error', onError);
    service.worker.on('failed', (job, error) => {
      // Each try failed, or the job lost its replica more than maxStalls times.
      const final = job && (job.attemptsMade >= (job.opts.attempts ?? 1) || /stalled more than/.test(error.message));
      if (job && final) void service.gaveUp(job.data, error);
    });
    service.sweeper = setInterval(() => {
      service.sweep().catch((error: unknown) => log?.error({ err: error }, 'batch sweep failed'));
    }, sweepMs).unref();
    return service;
  }

  get endpointNames(): string[] {
    return [...this.endpoints.keys()];
  }

  // Files.

  async receive(stream: Readable): Promise<ReceivedFile> {
    if (this.closed) throw new ApiError('shutting_down');
    return this.storage.receive(stream, this.settings.fileMaxMb * 1024 * 1024);
  }

  register(
    owner: string,
    received: ReceivedFile,
    filename: string,
    purpose: string,
    expiresAfter?: ExpiresAfter,
  ): Promise<FileRecord> {
    return this.guard(async () => {
      const file = uploadedFile(this, owner, received, filename, purpose, this.clock(), expiresAfter);
      await this.store.insertFile(file);
      return file;
    });
  }

  discard(received: { id: string }): void {
    this.storage.remove(received.id);
  }

  file(owner: string, id: string): Promise<FileRecord | undefined> {
    return this.guard(async () => {
      const file = await this.store.file(id);
      return file && file.owner === owner ? file : undefined;
    });
  }

  files(owner: string, page: Page, purpose?: string): Promise<FileRecord[]> {
    return this.guard(() => this.store.files(owner, page, purpose));
  }

  contentPath(file: FileRecord): string {
    return this.storage.path(file.id);
  }

  deleteFile(owner: string, id: string): Promise<boolean> {
    return this.guard(async () => {
      if (!(await this.file(owner, id))) return false;
      const deleted = await this.store.deleteFile(id);
      if (deleted === 'in_use') throw inputInUse(id);
      if (deleted) this.storage.remove(id);
      return deleted;
    });
  }

  // Batches.

  create(owner: string, request: CreateBatch): Promise<BatchRecord> {
    if (this.closed) throw new ApiError('shutting_down');
    return this.guard(async () => {
      const input = await this.file(owner, request.inputFileId);
      const batch = newBatchRecord(owner, request, this.endpoints, input, this.clock());
      await this.store.insertBatch(batch);
      await this.enqueue([{ kind: 'validate', batchId: batch.id }]);
      return (await this.store.batch(batch.id))!;
    });
  }

  batch(owner: string, id: string): Promise<BatchRecord | undefined> {
    return this.guard(async () => {
      const batch = await this.store.batch(id);
      return batch && batch.owner === owner ? batch : undefined;
    });
  }

  batches(owner: string, page: Page): Promise<BatchRecord[]> {
    return this.guard(() => this.store.batches(owner, page));
  }

  /** Cancels a batch: its waiting chunks are skipped, running ones stop, and it ends with the chunks it has. */
  cancel(owner: string, id: string): Promise<BatchRecord | undefined> {
    return this.guard(async () => {
      const batch = await this.batch(owner, id);
      if (!batch || finalStatuses.has(batch.status) || batch.status === 'cancelling') return batch;
      if (batch.status === 'finalizing')
        throw new ApiError('invalid_request', `The batch "${id}" is finalizing; it can no longer be cancelled.`);
      await this.store.transition(id, 'cancelling', this.clock(), { unless: [...finals, 'finalizing', 'cancelling'] });
      return this.store.batch(id);
    });
  }

  /**
   * Deletes the files past their `expires_at` that no unfinished batch reads. (Batches past their
   * window end as their chunks are taken: each chunk not yet run is answered `batch_expired`.)
   */
  async sweep(now = this.clock()): Promise<void> {
    if (this.closed) return;
    for (const id of await this.store.expiredFiles(now)) {
      if ((await this.store.deleteFile(id)) !== true) continue;
      this.storage.remove(id);
      this.log?.info?.({ file: id }, 'file expired');
    }
  }

  /** Stops taking jobs; running chunks stop and go back to the queue for any replica. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.sweeper);
    const closing = this.worker.close();
    for (const controller of this.running)
      controller.abort(new ApiError('shutting_down', 'The server shut down; the chunk runs again.'));
    await closing;
    await this.queue.close();
    await Promise.all(this.connections.map((connection) => connection.quit().catch(() => undefined)));
  }

  /**
   * Queues jobs (their ids say which batch and step, so a job queued twice runs once), each with
   * the trace context of the span that queued them when traced: a batch's jobs, on any replica,
   * are in the trace of the request that created it.
   */
  private enqueue(jobs: (JobOf<'validate'> | JobOf<'chunk'> | JobOf<'finalize'>)[]): Promise<unknown> {
    const add = (trace?: TraceCarrier) =>
      this.queue.addBulk(
        jobs.map((data) => ({
          name: data.kind,
          data: trace ? { ...data, trace } : data,
          opts: { jobId: `${data.batchId}-${data.kind === 'chunk' ? data.chunk.index : data.kind}` },
        })),
      );
    if (!tracer || jobs.length === 0) return add();
    const first = jobs[0]!;
    return sendSpan(
      tracer,
      chunkQueueName,
      {
        messages: jobs.length,
        attributes: { 'onnx_gateway.batch.id': first.batchId, 'onnx_gateway.batch.job': first.kind },
      },
      add,
    );
  }

  private process(job: Job<JobData>, token: string | undefined): Promise<void> {
    if (!tracer) return this.run(job, token);
    const data = job.data;
    const attributes: Attributes = { 'onnx_gateway.batch.id': data.batchId, 'onnx_gateway.batch.job': data.kind };
    if (data.kind === 'chunk') attributes['onnx_gateway.batch.chunk'] = data.chunk.index;
    return processSpan(tracer, chunkQueueName, { carrier: data.trace, messageId: job.id, attributes }, () =>
      this.run(job, token),
    );
  }

  private async run(job: Job<JobData>, token: string | undefined): Promise<void> {
    const data = job.data;
    if (data.kind === 'validate') return this.validate(data.batchId);
    if (data.kind === 'finalize') return this.finalize(data.batchId);
    const where = { batch: data.batchId, chunk: data.chunk.index };
    this.log?.info?.(where, 'batch chunk started');
    const result = await this.runChunk(data.batchId, data.chunk, job, token);
    if (!result) return;
    const { newly, all } = await this.store.chunkDone(data.batchId, data.chunk.index, result);
    this.log?.info?.(
      { ...where, completed: result.completed, failed: result.failed, counted: newly },
      'batch chunk done',
    );
    if (all) await this.queueFinalize(data.batchId);
  }

  /**
   * A job that failed every try (or lost its replica every time): a chunk's requests are answered
   * as failed so that its batch still ends; other jobs are only logged (their next cause runs them).
   */
  private async gaveUp(data: JobData, error: Error): Promise<void> {
    this.log?.error({ err: error, batch: data.batchId, kind: data.kind }, 'batch job failed');
    if (data.kind !== 'chunk') return;
    try {
      const batch = await this.store.batch(data.batchId);
      if (!batch || finalStatuses.has(batch.status)) return;
      const result = await runChunk(data.chunk, {
        core: this.core,
        runner: this.endpoints.get(batch.endpoint)!,
        inputPath: this.storage.path(batch.inputFileId),
        dir: this.storage.dir,
        batchId: data.batchId,
        inFlight: 1,
        signal: new AbortController().signal,
        answerAll: { code: 'request_failed', message: `The chunk of this request could not run: ${error.message}` },
      });
      if ((await this.store.chunkDone(data.batchId, data.chunk.index, result)).all)
        await this.queueFinalize(data.batchId);
    } catch (err) {
      this.log?.error({ err, batch: data.batchId }, 'batch chunk could not be answered as failed');
    }
  }

  /** Checks the input and queues its chunks (those not done yet, when run again). */
  private async validate(id: string): Promise<void> {
    const batch = await this.store.batch(id);
    if (!batch) return;
    if (batch.status === 'cancelling') return this.queueFinalize(id);
    if (batch.status !== 'validating' && batch.status !== 'in_progress') return;
    const input = await this.store.file(batch.inputFileId);
    const inputPath = input ? this.storage.path(input.id) : '';
    if (batch.status === 'validating') {
      const result = input
        ? await validateInput(inputPath, batch.endpoint, this.settings.batchMaxRequests)
        : {
            total: 0,
            errors: [{ code: 'file_not_found', message: 'The input file was deleted.', param: null, line: null }],
          };
      if (result.errors.length > 0) {
        await this.store.fail(id, result.errors, this.clock());
        return;
      }
      const chunks = await cutChunks(inputPath, this.settings.batchChunkLines);
      const started = await this.store.transition(
        id,
        'in_progress',
        this.clock(),
        { only: ['validating'] },
        {
          total: result.total,
          chunks: chunks.length,
        },
      );
      // A cancel that came while validating: nothing runs.
      if (!started) return this.queueFinalize(id);
      return this.queueChunks(id, chunks);
    }
    await this.queueChunks(id, await cutChunks(inputPath, this.settings.batchChunkLines));
  }

  private async queueChunks(id: string, chunks: Chunk[]): Promise<void> {
    const done = await this.store.chunkResults(id);
    await this.enqueue(
      chunks.filter((chunk) => !done.has(chunk.index)).map((chunk) => ({ kind: 'chunk', batchId: id, chunk })),
    );
  }

  private async queueFinalize(id: string): Promise<void> {
    await this.enqueue([{ kind: 'finalize', batchId: id }]);
  }

  /**
   * One run of a chunk: its result to record, or undefined when the batch is gone or over. A
   * shutdown puts the job back in the queue; a cancel records the chunk as skipped.
   */
  private async runChunk(
    id: string,
    chunk: Chunk,
    job: Job<JobData>,
    token: string | undefined,
  ): Promise<ChunkResult | undefined> {
    const batch = await this.store.batch(id);
    if (!batch || finalStatuses.has(batch.status)) return undefined;
    if (batch.status === 'cancelling') return skipped();
    const expired = this.clock() >= batch.expiresAt;
    if (expired) await this.store.markExpired(id);
    const controller = new AbortController();
    this.running.add(controller);
    const watch = setInterval(() => {
      void this.store
        .batch(id)
        .then((now) => {
          if (now?.status === 'cancelling') controller.abort(new ApiError('client_closed', 'The batch was cancelled.'));
        })
        .catch(() => undefined);
    }, cancelCheckMs);
    try {
      return await runChunk(chunk, {
        core: this.core,
        runner: this.endpoints.get(batch.endpoint)!,
        inputPath: this.storage.path(batch.inputFileId),
        dir: this.storage.dir,
        batchId: id,
        inFlight: this.settings.batchInFlight,
        signal: controller.signal,
        answerAll: expired ? expiredError : undefined,
      });
    } catch (error) {
      const reason: unknown = controller.signal.reason;
      if (reason instanceof ApiError && reason.code === 'client_closed') return skipped();
      if (reason instanceof ApiError && reason.code === 'shutting_down' && token) {
        await job.moveToWait(token);
        throw new WaitingError();
      }
      throw error;
    } finally {
      clearInterval(watch);
      this.running.delete(controller);
    }
  }

  /** Joins the recorded parts in chunk order into the output and error files and ends the batch. */
  private async finalize(id: string): Promise<void> {
    let batch = await this.store.batch(id);
    if (!batch) return;
    if (!finalStatuses.has(batch.status)) {
      await this.store.transition(id, 'finalizing', this.clock(), { only: ['in_progress'] });
      batch = (await this.store.batch(id))!;
      const count = await this.store.chunkCount(id);
      const results = await this.store.chunkResults(id);
      const publish = async (kind: 'output' | 'error'): Promise<string | null> => {
        const parts: string[] = [];
        for (let index = 0; index < count; index++) {
          const result = results.get(index);
          if (result && (kind === 'output' ? result.completed : result.failed) > 0)
            parts.push(partPath(this.storage.dir, id, index, result.token, kind));
        }
        if (parts.length === 0) return null;
        const fileId = resultFileId(id, kind);
        const bytes = await joinParts(parts, this.storage.path(fileId));
        const createdAt = this.clock();
        const after = batch!.outputExpiresAfter;
        await this.store.insertFile({
          id: fileId,
          owner: batch!.owner,
          purpose: 'batch_output',
          filename: `${id}_${kind}.jsonl`,
          bytes,
          createdAt,
          expiresAt: after === null ? null : createdAt + after,
        });
        return fileId;
      };
      await this.store.setResultFiles(id, await publish('output'), await publish('error'));
      const status: BatchStatus =
        batch.status === 'cancelling' ? 'cancelled' : (await this.store.isExpired(id)) ? 'expired' : 'completed';
      await this.store.transition(id, status, this.clock(), { unless: finals });
    }
    await removeParts(this.storage.dir, id);
    await this.store.forgetChunks(id);
  }

  /** Redis errors become 503 store_unavailable; errors of the catalogue pass through. */
  private async guard<T>(operation: () => Promise<T>): Promise<T> {
    try {
      return await operation();
    } catch (error) {
      if (error instanceof ApiError) throw error;
      this.log?.error({ err: error }, 'batch store failed');
      throw new ApiError('store_unavailable', 'The shared batch store (Redis) did not answer; retry later.', {
        cause: error,
      });
    }
  }
}

/** Writes the parts one after another to `target` (under a temporary name, synced, then renamed); its size. */
async function joinParts(parts: string[], target: string): Promise<number> {
  const temporary = `${target}.join`;
  const handle = await open(temporary, 'w');
  try {
    for (const part of parts)
      for await (const bytes of createReadStream(part) as AsyncIterable<Buffer>) await handle.write(bytes);
    await handle.datasync();
    const { size } = await handle.stat();
    await handle.close();
    await rename(temporary, target);
    return size;
  } catch (error) {
    await handle.close().catch(() => undefined);
    await rm(temporary, { force: true });
    throw error;
  }
}
