/**
 * Bulk work: the files API and OpenAI's batches on one server. Files are streamed to the files
 * dir; the records of files and batches are in SQLite under the data dir. A batch is validated,
 * then its requests run through core at bulk priority (behind every interactive request), a
 * window at a time, their answers appended to the output and error files as they come (run.ts).
 * A start resumes every batch the last process left unfinished, from its last committed line.
 *
 * Files and batches belong to their owner (the API key that made them): another owner sees
 * nothing, as if they did not exist. A sweep every minute deletes the files past their
 * `expires_at` and ends the batches past their completion window (`expired`).
 */
import { existsSync, renameSync, rmSync, truncateSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type { Config } from '../config.js';
import type { CoreContext } from '../core/context.js';
import { ApiError } from '../errors.js';
import { openDatabase } from '../sqlite.js';
import { FileStorage, resultFileId } from './files.js';
import { expireRemaining, runRequests, type RunEnd } from './run.js';
import { BatchStore, type Page } from './store.js';
import { finalStatuses, type BatchEndpoints, type BatchRecord, type FileRecord } from './types.js';
import { validateInput } from './validate.js';
import type { Batches, CreateBatch, ExpiresAfter, ReceivedFile } from './batches.js';
import { inputInUse, newBatchRecord, seconds, sweepMs, uploadedFile, type Clock } from './requests.js';

export type BatchSettings = Pick<
  Config,
  'dataDir' | 'filesDir' | 'fileMaxMb' | 'batchMaxRequests' | 'batchConcurrency' | 'batchInFlight'
>;

export interface BatchLog {
  error(object: unknown, message: string): void;
  info?(object: unknown, message: string): void;
}

/** `core` with every input of a batch waiting in the scheduler's bulk queues, behind interactive requests. */
export function bulkCore(core: CoreContext): CoreContext {
  return {
    ...core,
    scheduler: {
      submit: (model, inputs, signal, kind) => core.scheduler.submit(model, inputs, signal, kind, 'bulk'),
    },
  };
}

export class BatchService implements Batches {
  private readonly queue: string[] = [];
  private readonly running = new Map<string, { controller: AbortController; done: Promise<void> }>();
  private closed = false;
  private sweeper?: NodeJS.Timeout;

  private constructor(
    private readonly core: CoreContext,
    private readonly endpoints: BatchEndpoints,
    private readonly settings: BatchSettings,
    private readonly store: BatchStore,
    readonly storage: FileStorage,
    private readonly log?: BatchLog,
    private readonly clock: Clock = seconds,
  ) {}

  /** Opens the records and the files dir, and resumes the batches a previous process left unfinished. */
  static open(
    core: CoreContext,
    endpoints: BatchEndpoints,
    settings: BatchSettings,
    log?: BatchLog,
    clock?: Clock,
  ): BatchService {
    const store = new BatchStore(openDatabase(join(settings.dataDir, 'batch', 'batches.sqlite')));
    const storage = new FileStorage(settings.filesDir ?? join(settings.dataDir, 'files'));
    const service = new BatchService(bulkCore(core), endpoints, settings, store, storage, log, clock);
    for (const id of store.unfinished()) {
      const batch = store.batch(id)!;
      if (batch.status !== 'validating')
        log?.info?.({ batch: id, status: batch.status, line: batch.progress.nextLine }, 'batch resumed');
      service.queue.push(id);
    }
    service.pump();
    service.sweeper = setInterval(() => {
      service.sweep().catch((error: unknown) => log?.error({ err: error }, 'batch sweep failed'));
    }, sweepMs).unref();
    return service;
  }

  /** The endpoints a batch may name. */
  get endpointNames(): string[] {
    return [...this.endpoints.keys()];
  }

  // Files.

  /**
   * Writes an upload's file to disk from its stream, before its record exists (a form may send
   * its purpose after the file); `register` makes it a file of the API, `discard` drops it.
   */
  async receive(stream: Readable): Promise<{ id: string; bytes: number }> {
    if (this.closed) throw new ApiError('shutting_down');
    return this.storage.receive(stream, this.settings.fileMaxMb * 1024 * 1024);
  }

  /** Makes a received file a file of the API. Only batch inputs are taken. */
  register(
    owner: string,
    received: ReceivedFile,
    filename: string,
    purpose: string,
    expiresAfter?: ExpiresAfter,
  ): Promise<FileRecord> {
    // A refused upload rejects the promise, as the shared service's does.
    return Promise.resolve().then(() => {
      const file = uploadedFile(this, owner, received, filename, purpose, this.clock(), expiresAfter);
      this.store.insertFile(file);
      return file;
    });
  }

  discard(received: { id: string }): void {
    this.storage.remove(received.id);
  }

  file(owner: string, id: string): Promise<FileRecord | undefined> {
    return Promise.resolve(this.ownFile(owner, id));
  }

  files(owner: string, page: Page, purpose?: string): Promise<FileRecord[]> {
    return Promise.resolve(this.store.files(owner, page, purpose));
  }

  /** Where a file's content is on disk (the caller streams it). */
  contentPath(file: FileRecord): string {
    return this.storage.path(file.id);
  }

  /** Deletes a file; a batch still reading it keeps it. */
  deleteFile(owner: string, id: string): Promise<boolean> {
    if (!this.ownFile(owner, id)) return Promise.resolve(false);
    if (this.store.fileInUse(id)) throw inputInUse(id);
    this.store.deleteFile(id);
    this.storage.remove(id);
    return Promise.resolve(true);
  }

  // Batches.

  create(owner: string, request: CreateBatch): Promise<BatchRecord> {
    if (this.closed) throw new ApiError('shutting_down');
    const batch = newBatchRecord(
      owner,
      request,
      this.endpoints,
      this.ownFile(owner, request.inputFileId),
      this.clock(),
    );
    this.store.insertBatch(batch);
    this.queue.push(batch.id);
    this.pump();
    return Promise.resolve(this.store.batch(batch.id)!);
  }

  batch(owner: string, id: string): Promise<BatchRecord | undefined> {
    return Promise.resolve(this.ownBatch(owner, id));
  }

  batches(owner: string, page: Page): Promise<BatchRecord[]> {
    return Promise.resolve(this.store.batches(owner, page));
  }

  /** Cancels a batch: it stops taking requests, keeps the answers it has and ends `cancelled`. */
  cancel(owner: string, id: string): Promise<BatchRecord | undefined> {
    const batch = this.ownBatch(owner, id);
    if (!batch || finalStatuses.has(batch.status) || batch.status === 'cancelling') return Promise.resolve(batch);
    if (batch.status === 'finalizing')
      throw new ApiError('invalid_request', `The batch "${id}" is finalizing; it can no longer be cancelled.`);
    this.store.setStatus(id, 'cancelling', this.clock(), [...finalStatuses, 'finalizing']);
    const running = this.running.get(id);
    if (running) running.controller.abort(new ApiError('client_closed', 'The batch was cancelled.'));
    else {
      // Waiting for a turn: it ends now.
      const at = this.queue.indexOf(id);
      if (at >= 0) this.queue.splice(at, 1);
      this.start(id);
    }
    return Promise.resolve(this.store.batch(id));
  }

  /**
   * Deletes the files past their `expires_at` that no unfinished batch reads, and starts at once
   * the waiting batches past their completion window, which end `expired` (a running one ends so
   * at its next request).
   */
  sweep(now = this.clock()): Promise<void> {
    if (this.closed) return Promise.resolve();
    for (const id of this.store.expiredFiles(now)) {
      this.store.deleteFile(id);
      this.storage.remove(id);
      this.log?.info?.({ file: id }, 'file expired');
    }
    for (const id of [...this.queue]) {
      const batch = this.store.batch(id);
      if (!batch || now < batch.expiresAt) continue;
      this.queue.splice(this.queue.indexOf(id), 1);
      this.start(id);
    }
    return Promise.resolve();
  }

  /** Resolves once no batch runs (tests, and commands that wait for their batch). */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running.values()].map((r) => r.done));
  }

  /** Stops running batches where they are (they resume at the next start) and closes the records. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.sweeper);
    for (const { controller } of this.running.values())
      controller.abort(new ApiError('shutting_down', 'The server shut down; the batch resumes at its next start.'));
    await Promise.all([...this.running.values()].map((r) => r.done));
    this.store.close();
  }

  private ownFile(owner: string, id: string): FileRecord | undefined {
    const file = this.store.file(id);
    return file && file.owner === owner ? file : undefined;
  }

  private ownBatch(owner: string, id: string): BatchRecord | undefined {
    const batch = this.store.batch(id);
    return batch && batch.owner === owner ? batch : undefined;
  }

  private pump(): void {
    while (!this.closed && this.running.size < this.settings.batchConcurrency && this.queue.length > 0)
      this.start(this.queue.shift()!);
  }

  private start(id: string): void {
    const controller = new AbortController();
    const done = this.advance(id, controller.signal)
      .catch((error: unknown) => this.log?.error({ err: error, batch: id }, 'batch run failed'))
      .finally(() => {
        this.running.delete(id);
        this.pump();
      });
    this.running.set(id, { controller, done });
  }

  /** Takes a batch through its statuses from wherever it stands. */
  private async advance(id: string, signal: AbortSignal): Promise<void> {
    let batch = this.store.batch(id);
    if (!batch) return;
    if (batch.status === 'validating') {
      const input = this.store.file(batch.inputFileId);
      const result = input
        ? await validateInput(this.storage.path(input.id), batch.endpoint, this.settings.batchMaxRequests)
        : {
            total: 0,
            errors: [{ code: 'file_not_found', message: 'The input file was deleted.', param: null, line: null }],
          };
      if (result.errors.length > 0) {
        this.store.fail(id, result.errors, this.clock());
        return;
      }
      // A cancel that came while validating keeps the batch `cancelling`.
      this.store.startRun(id, result.total, this.clock());
      batch = this.store.batch(id)!;
    }
    let end: RunEnd = 'done';
    if (batch.status === 'in_progress' && !signal.aborted) {
      end = await runRequests(batch, {
        store: this.store,
        core: this.core,
        runner: this.endpoints.get(batch.endpoint)!,
        inputPath: this.storage.path(batch.inputFileId),
        outputPath: this.storage.runPath(id, 'output'),
        errorPath: this.storage.runPath(id, 'error'),
        inFlight: this.settings.batchInFlight,
        signal,
        now: this.clock,
      });
      batch = this.store.batch(id)!;
    }
    if (batch.status === 'cancelling') return this.finish(batch, 'cancelled');
    if (end === 'stopped') return; // a shutdown: the next start resumes it
    if (end === 'expired' || (batch.status === 'in_progress' && this.clock() >= batch.expiresAt)) {
      await expireRemaining(batch, {
        store: this.store,
        inputPath: this.storage.path(batch.inputFileId),
        outputPath: this.storage.runPath(id, 'output'),
        errorPath: this.storage.runPath(id, 'error'),
        inFlight: 0,
        signal,
      });
      return this.finish(this.store.batch(id)!, 'expired');
    }
    if (batch.status === 'in_progress') this.store.setStatus(id, 'finalizing', this.clock(), ['cancelling']);
    batch = this.store.batch(id)!;
    if (batch.status === 'finalizing') return this.finish(batch, 'completed');
    if (batch.status === 'cancelling') return this.finish(batch, 'cancelled');
  }

  /**
   * Makes the run's files files of the API (cut to their committed lengths: a killed run may
   * have written past them) and ends the batch. Safe to run again after a kill at any step.
   */
  private finish(batch: BatchRecord, status: 'completed' | 'cancelled' | 'expired'): void {
    const publish = (kind: 'output' | 'error', bytes: number): string | null => {
      const part = this.storage.runPath(batch.id, kind);
      const id = resultFileId(batch.id, kind);
      const createdAt = this.clock();
      if (bytes === 0) {
        rmSync(part, { force: true });
        return null;
      }
      if (existsSync(part)) {
        // Cut back anything written after the last commit.
        truncateSync(part, bytes);
        renameSync(part, this.storage.path(id));
      }
      this.store.insertFile({
        id,
        owner: batch.owner,
        purpose: 'batch_output',
        filename: `${batch.id}_${kind}.jsonl`,
        bytes,
        createdAt,
        expiresAt: batch.outputExpiresAfter === null ? null : createdAt + batch.outputExpiresAfter,
      });
      return id;
    };
    const outputFileId = publish('output', batch.progress.outputBytes);
    const errorFileId = publish('error', batch.progress.errorBytes);
    this.store.setResultFiles(batch.id, outputFileId, errorFileId);
    this.store.setStatus(batch.id, status, this.clock());
  }
}
