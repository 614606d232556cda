/**
 * What the files API and the batch routes ask of bulk work, whichever runs it: one server with
 * its records in SQLite (service.ts), or replicas sharing chunks of batches through Redis
 * (shared.ts).
 */
import type { Readable } from 'node:stream';
import type { Page } from './store.js';
import type { BatchRecord, FileRecord } from './types.js';

export interface CreateBatch {
  inputFileId: string;
  endpoint: string;
  completionWindow: string;
  metadata?: Record<string, string> | null;
  /** OpenAI's `output_expires_after`: the output and error files expire this long after they are made. */
  outputExpiresAfter?: ExpiresAfter;
}

/** OpenAI's expiration policy of a file: `seconds` after its `anchor` (only `created_at`). */
export interface ExpiresAfter {
  anchor: string;
  seconds: number;
}

/** A file received to disk, not yet a file of the API. */
export interface ReceivedFile {
  id: string;
  bytes: number;
}

export interface Batches {
  /** The endpoints a batch may name. */
  readonly endpointNames: string[];
  /**
   * Writes an upload's file to disk from its stream, before its record exists (a form may send
   * its purpose after the file); `register` makes it a file of the API, `discard` drops it.
   */
  receive(stream: Readable): Promise<ReceivedFile>;
  /** Makes a received file a file of the API. Only batch inputs are taken. */
  register(
    owner: string,
    received: ReceivedFile,
    filename: string,
    purpose: string,
    expiresAfter?: ExpiresAfter,
  ): Promise<FileRecord>;
  discard(received: { id: string }): void;
  file(owner: string, id: string): Promise<FileRecord | undefined>;
  files(owner: string, page: Page, purpose?: string): Promise<FileRecord[]>;
  /** Where a file's content is on disk (the caller streams it). */
  contentPath(file: FileRecord): string;
  /** Deletes a file; false when the owner has none of that id. A batch still reading it keeps it (400). */
  deleteFile(owner: string, id: string): Promise<boolean>;
  create(owner: string, request: CreateBatch): Promise<BatchRecord>;
  batch(owner: string, id: string): Promise<BatchRecord | undefined>;
  batches(owner: string, page: Page): Promise<BatchRecord[]>;
  /** Cancels a batch: it stops taking requests, keeps the answers it has and ends `cancelled`. */
  cancel(owner: string, id: string): Promise<BatchRecord | undefined>;
  /**
   * Deletes the files whose time has come (not while a running batch reads one) and ends the
   * batches past their completion window; runs on a timer, and at `now` when called.
   */
  sweep(now?: number): Promise<void>;
  /** Stops running where it is (the work resumes at the next start, or on another replica). */
  close(): Promise<void>;
}
