/**
 * The records of the files API and of batches, as stored, and what a batch's requests run on.
 * Times are Unix seconds, as OpenAI's objects carry them.
 */
import type { CoreContext } from '../core/context.js';

/** What a file is for: an uploaded batch input, or a batch's output or error file. */
export type FilePurpose = 'batch' | 'batch_output';

export interface FileRecord {
  id: string;
  owner: string;
  purpose: FilePurpose;
  filename: string;
  bytes: number;
  createdAt: number;
  /** When the file is deleted (OpenAI's `expires_after`); null: kept until deleted. */
  expiresAt: number | null;
}

export type BatchStatus =
  'validating' | 'failed' | 'in_progress' | 'finalizing' | 'completed' | 'expired' | 'cancelling' | 'cancelled';

/** Statuses a batch never leaves. */
export const finalStatuses: ReadonlySet<BatchStatus> = new Set(['failed', 'completed', 'expired', 'cancelled']);

/** A line of the input file that fails the batch before anything runs (OpenAI's BatchError). */
export interface BatchLineError {
  code: string;
  message: string;
  param: string | null;
  line: number | null;
}

export interface BatchRecord {
  id: string;
  owner: string;
  endpoint: string;
  inputFileId: string;
  completionWindow: string;
  /** Seconds after their creation that the output and error files expire (`output_expires_after`); null: kept. */
  outputExpiresAfter: number | null;
  status: BatchStatus;
  metadata: Record<string, string> | null;
  errors: BatchLineError[] | null;
  outputFileId: string | null;
  errorFileId: string | null;
  createdAt: number;
  inProgressAt: number | null;
  expiresAt: number;
  finalizingAt: number | null;
  completedAt: number | null;
  failedAt: number | null;
  expiredAt: number | null;
  cancellingAt: number | null;
  cancelledAt: number | null;
  /** Requests in the input file (known once validated). */
  total: number;
  completed: number;
  failed: number;
  /** The input tokens of the requests answered with success, as their `usage` counted them: the batch's usage. */
  inputTokens: number;
  /**
   * Where the run stands, committed together after each stretch of answers is on disk: the next
   * input line (and its byte offset), and how long the output and error files were then. A run
   * that stopped anywhere (a kill included) resumes there, the files cut back to those lengths.
   */
  progress: BatchProgress;
}

export interface BatchProgress {
  nextLine: number;
  inputOffset: number;
  outputBytes: number;
  errorBytes: number;
}

/**
 * How one request of a batch ended: the answer the endpoint gives it (a success or the endpoint's
 * error: an unknown model, bad input), with its status and body as JSON text.
 */
export interface RequestOutcome {
  ok: boolean;
  status: number;
  body: string;
  /** A success's input tokens (its usage's prompt_tokens). */
  inputTokens?: number;
}

/**
 * Runs one request's body as its endpoint does, on `core` (whose scheduler puts bulk work behind
 * interactive work). Throws only when trying again later may answer differently (a full queue, a
 * shutdown); the batch then waits and retries the request.
 */
export type EndpointRunner = (core: CoreContext, body: unknown, signal: AbortSignal) => Promise<RequestOutcome>;

/** The endpoints a batch may name, by their URL path, and how each runs a request. */
export type BatchEndpoints = ReadonlyMap<string, EndpointRunner>;
