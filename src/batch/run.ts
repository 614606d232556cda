/**
 * Running a validated batch: its requests read one line at a time from where the last run
 * stopped, a window of them in flight, their answers appended in input order to the output file
 * (successes) and the error file (failures) and, once those bytes are on disk, the new position
 * committed in the same record as the counts. A process that dies at any point leaves files that
 * may be longer than the record says; the next run cuts them back to the committed lengths and
 * reads on from the committed line, so every request is answered exactly once.
 */
import { createHash } from 'node:crypto';
import { open, truncate, type FileHandle } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CoreContext } from '../core/context.js';
import { ApiError } from '../errors.js';
import { readLines } from './jsonl.js';
import type { BatchStore } from './store.js';
import type { BatchProgress, BatchRecord, EndpointRunner, RequestOutcome } from './types.js';
import type { RequestLine } from './validate.js';

/** Tries of a request whose endpoint said "later" (a full queue) before it is answered as failed. */
const maxAttempts = 8;
/** Answers held before they are written and committed, and the longest they wait for it. */
const commitLines = 512;
const commitMs = 1000;

export interface RunOptions {
  store: BatchStore;
  core: CoreContext;
  runner: EndpointRunner;
  inputPath: string;
  outputPath: string;
  errorPath: string;
  /** Requests in flight at once. */
  inFlight: number;
  signal: AbortSignal;
  now?: () => number;
}

/** How a run ended: every line answered, stopped (a cancel or a shutdown), or out of time. */
export type RunEnd = 'done' | 'stopped' | 'expired';

export interface Answer {
  line: 'output' | 'error';
  text: string;
  /** A success's input tokens (0 for an error). */
  inputTokens: number;
}

const hashId = (prefix: string, batchId: string, line: number) =>
  `${prefix}${createHash('sha256').update(`${batchId}:${line}`).digest('hex').slice(0, 24)}`;

/** A request's line of the output or error file, in OpenAI's shape. */
export function resultLine(
  batchId: string,
  lineNumber: number,
  customId: string,
  outcome: RequestOutcome | undefined,
  error?: { code: string; message: string },
): string {
  const response = outcome
    ? `{"status_code":${outcome.status},"request_id":"${hashId('req_', batchId, lineNumber)}","body":${outcome.body}}`
    : 'null';
  return `{"id":"${hashId('batch_req_', batchId, lineNumber)}","custom_id":${JSON.stringify(customId)},"response":${response},"error":${error ? JSON.stringify(error) : 'null'}}\n`;
}

/** Opens a result file for appending, cut back to what the record says was committed. */
async function openAt(path: string, bytes: number): Promise<FileHandle> {
  const handle = await open(path, 'a');
  const { size } = await handle.stat();
  if (size > bytes) await truncate(path, bytes);
  else if (size < bytes) {
    await handle.close();
    throw new Error(`${path} has ${size} bytes but ${bytes} were committed: the files dir lost data.`);
  }
  return handle;
}

export async function runRequests(batch: BatchRecord, options: RunOptions): Promise<RunEnd> {
  const { store, signal } = options;
  const now = options.now ?? (() => Math.floor(Date.now() / 1000));
  const progress: BatchProgress = { ...batch.progress };
  const output = await openAt(options.outputPath, progress.outputBytes);
  const errors = await openAt(options.errorPath, progress.errorBytes).catch(async (error: unknown) => {
    await output.close();
    throw error;
  });

  const window: { end: number; number: number; answer: Promise<Answer> }[] = [];
  let held: Answer[] = [];
  let heldUntil = { end: progress.inputOffset, number: progress.nextLine };
  let lastCommit = Date.now();

  const commit = async () => {
    if (held.length === 0) return;
    const out = held.filter((a) => a.line === 'output').map((a) => a.text);
    const err = held.filter((a) => a.line === 'error').map((a) => a.text);
    if (out.length > 0) {
      const text = out.join('');
      await output.appendFile(text);
      await output.datasync();
      progress.outputBytes += Buffer.byteLength(text);
    }
    if (err.length > 0) {
      const text = err.join('');
      await errors.appendFile(text);
      await errors.datasync();
      progress.errorBytes += Buffer.byteLength(text);
    }
    progress.inputOffset = heldUntil.end;
    progress.nextLine = heldUntil.number;
    const inputTokens = held.reduce((sum, a) => sum + a.inputTokens, 0);
    store.commit(batch.id, progress, out.length, err.length, inputTokens);
    held = [];
    lastCommit = Date.now();
  };

  // Takes the oldest request's answer; false when the run stopped under it.
  const settleOldest = async (): Promise<boolean> => {
    const oldest = window.shift()!;
    try {
      held.push(await oldest.answer);
    } catch {
      return false;
    }
    heldUntil = { end: oldest.end, number: oldest.number };
    if (held.length >= commitLines || Date.now() - lastCommit >= commitMs) await commit();
    return true;
  };

  let end: RunEnd = 'done';
  try {
    for await (const line of readLines(options.inputPath, progress.inputOffset, progress.nextLine + 1)) {
      if (signal.aborted) {
        end = 'stopped';
        break;
      }
      if (now() >= batch.expiresAt) {
        end = 'expired';
        break;
      }
      const request = JSON.parse(line.text) as RequestLine;
      const answer = answerRequest(batch.id, line.number, request, options);
      answer.catch(() => undefined);
      window.push({ end: line.end, number: line.number, answer });
      if (window.length >= options.inFlight && !(await settleOldest())) {
        end = 'stopped';
        break;
      }
    }
    while (window.length > 0) {
      if (!(await settleOldest())) {
        end = 'stopped';
        break;
      }
    }
    if (end === 'done' && signal.aborted) end = 'stopped';
    // What was answered before a stop is kept: a request is never run twice for nothing.
    await commit();
  } finally {
    await Promise.allSettled(window.map((w) => w.answer));
    await output.close();
    await errors.close();
  }
  return end;
}

export async function answerRequest(
  batchId: string,
  lineNumber: number,
  request: RequestLine,
  { core, runner, signal }: Pick<RunOptions, 'core' | 'runner' | 'signal'>,
): Promise<Answer> {
  for (let attempt = 1; ; attempt++) {
    let outcome: RequestOutcome;
    try {
      outcome = await runner(core, request.body, signal);
    } catch (error) {
      if (signal.aborted) throw error;
      if (attempt >= maxAttempts) {
        const message = error instanceof Error ? error.message : String(error);
        return {
          line: 'error',
          text: resultLine(batchId, lineNumber, request.custom_id, undefined, { code: 'request_failed', message }),
          inputTokens: 0,
        };
      }
      // A full queue says when to come back; anything else waits longer each time.
      const seconds = error instanceof ApiError && error.retryAfterSeconds ? error.retryAfterSeconds : 2 ** attempt / 4;
      await sleep(seconds * 1000, undefined, { signal });
      continue;
    }
    return {
      line: outcome.ok ? 'output' : 'error',
      text: resultLine(batchId, lineNumber, request.custom_id, outcome),
      inputTokens: outcome.ok ? (outcome.inputTokens ?? 0) : 0,
    };
  }
}

/**
 * The requests a batch did not reach before it expired, each answered in the error file with
 * `batch_expired` (as OpenAI's); committed like any other answers.
 */
export async function expireRemaining(batch: BatchRecord, options: Omit<RunOptions, 'runner' | 'core'>): Promise<void> {
  const progress: BatchProgress = { ...batch.progress };
  const errors = await openAt(options.errorPath, progress.errorBytes);
  const output = await openAt(options.outputPath, progress.outputBytes);
  await output.close();
  try {
    let held: string[] = [];
    const flush = async (end: number, number: number) => {
      const text = held.join('');
      await errors.appendFile(text);
      await errors.datasync();
      progress.errorBytes += Buffer.byteLength(text);
      progress.inputOffset = end;
      progress.nextLine = number;
      options.store.commit(batch.id, progress, 0, held.length);
      held = [];
    };
    let last = { end: progress.inputOffset, number: progress.nextLine };
    for await (const line of readLines(options.inputPath, progress.inputOffset, progress.nextLine + 1)) {
      const request = JSON.parse(line.text) as RequestLine;
      held.push(
        resultLine(batch.id, line.number, request.custom_id, undefined, {
          code: 'batch_expired',
          message: 'This request could not be executed before the completion window expired.',
        }),
      );
      last = { end: line.end, number: line.number };
      if (held.length >= commitLines) await flush(last.end, last.number);
    }
    if (held.length > 0) await flush(last.end, last.number);
  } finally {
    await errors.close();
  }
}
