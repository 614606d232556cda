/**
 * The checks of a new file or batch and the records they make, the same whichever service keeps
 * them (one server's SQLite, or Redis shared by replicas).
 */
import { randomBytes } from 'node:crypto';
import { ApiError, invalid } from '../errors.js';
import type { CreateBatch, ExpiresAfter, ReceivedFile } from './batches.js';
import type { BatchEndpoints, BatchRecord, FileRecord } from './types.js';

/** The completion windows a batch may ask for, in seconds (OpenAI's one). */
const completionWindows: Record<string, number> = { '24h': 24 * 3600 };

export const seconds = (): number => Math.floor(Date.now() / 1000);

/** The clock of the batch services, in Unix seconds (tests move it). */
export type Clock = () => number;

/** How often the services delete expired files and end expired batches. */
export const sweepMs = 60_000;

/** The seconds of an expiration policy, checked as OpenAI's: anchor `created_at`, 1 hour to 30 days. */
export function expirySeconds(policy: ExpiresAfter | undefined, param: string): number | null {
  if (policy === undefined) return null;
  if (policy.anchor !== 'created_at')
    throw invalid(`${param}.anchor`, `${param}.anchor must be "created_at"; got "${policy.anchor}".`);
  const value = Number(policy.seconds);
  if (!Number.isInteger(value) || value < 3600 || value > 2_592_000)
    throw invalid(
      `${param}.seconds`,
      `${param}.seconds must be a whole number from 3600 (1 hour) to 2592000 (30 days); got ${policy.seconds}.`,
    );
  return value;
}

/** A received upload as a file of the API; anything but a batch input is refused and dropped. */
export function uploadedFile(
  files: { discard(received: { id: string }): void },
  owner: string,
  received: ReceivedFile,
  filename: string,
  purpose: string,
  now: number,
  expiresAfter?: ExpiresAfter,
): FileRecord {
  let expires: number | null;
  try {
    if (purpose !== 'batch')
      throw invalid('purpose', `purpose must be "batch" (this server takes files for batches only); got "${purpose}".`);
    expires = expirySeconds(expiresAfter, 'expires_after');
  } catch (error) {
    files.discard(received);
    throw error;
  }
  return {
    id: received.id,
    owner,
    purpose: 'batch',
    filename,
    bytes: received.bytes,
    createdAt: now,
    expiresAt: expires === null ? null : now + expires,
  };
}

/** A new batch's record, `validating`, once its endpoint, window and input file (the owner's, or undefined) pass. */
export function newBatchRecord(
  owner: string,
  request: CreateBatch,
  endpoints: BatchEndpoints,
  input: FileRecord | undefined,
  now: number,
): BatchRecord {
  if (!endpoints.has(request.endpoint))
    throw invalid(
      'endpoint',
      `endpoint must be one of ${[...endpoints.keys()].map((e) => `"${e}"`).join(', ')}; got "${request.endpoint}".`,
    );
  const window = completionWindows[request.completionWindow];
  if (window === undefined)
    throw invalid('completion_window', `completion_window must be "24h"; got "${request.completionWindow}".`);
  if (!input) throw new ApiError('not_found', `No file "${request.inputFileId}".`, { param: 'input_file_id' });
  if (input.purpose !== 'batch')
    throw invalid('input_file_id', `The file "${input.id}" was not uploaded with purpose "batch".`);
  const outputExpiresAfter = expirySeconds(request.outputExpiresAfter, 'output_expires_after');
  return {
    id: `batch_${randomBytes(12).toString('hex')}`,
    owner,
    endpoint: request.endpoint,
    inputFileId: input.id,
    completionWindow: request.completionWindow,
    outputExpiresAfter,
    status: 'validating',
    metadata: request.metadata ?? null,
    errors: null,
    outputFileId: null,
    errorFileId: null,
    createdAt: now,
    inProgressAt: null,
    expiresAt: now + window,
    finalizingAt: null,
    completedAt: null,
    failedAt: null,
    expiredAt: null,
    cancellingAt: null,
    cancelledAt: null,
    total: 0,
    completed: 0,
    failed: 0,
    inputTokens: 0,
    progress: { nextLine: 0, inputOffset: 0, outputBytes: 0, errorBytes: 0 },
  };
}

/** A batch that is still running reads its input: it may not be deleted under it. */
export const inputInUse = (id: string): ApiError =>
  new ApiError('invalid_request', `The file "${id}" is the input of a batch that has not finished.`, {
    param: 'file_id',
  });
