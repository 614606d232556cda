/**
 * Chunks of a batch, for replicas that share its work: the input file cut at line boundaries
 * every `lines` requests, and one chunk run into part files of its own. Each run of a chunk
 * writes parts named by a token of its own, synced and renamed into place once whole; the first
 * run to record its token in the batch's record is the one the output is made from. A chunk run
 * again after its replica died, or twice at once, so never adds a line to another run's part.
 */
import { randomBytes } from 'node:crypto';
import { open, readdir, rename, rm, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { CoreContext } from '../core/context.js';
import { readLines } from './jsonl.js';
import { answerRequest, resultLine, type Answer } from './run.js';
import type { EndpointRunner } from './types.js';
import type { RequestLine } from './validate.js';

/** A stretch of the input file: bytes [start, end), whose first line is number `firstLine` (1-based). */
export interface Chunk {
  index: number;
  start: number;
  end: number;
  firstLine: number;
}

/** What a run of a chunk wrote, under its token. */
export interface ChunkResult {
  token: string;
  completed: number;
  failed: number;
  /** The successes' input tokens; absent in results recorded before it was counted. */
  inputTokens?: number;
}

/** The input cut every `lines` requests (blank lines are read with the chunk they fall in). */
export async function cutChunks(inputPath: string, lines: number): Promise<Chunk[]> {
  const chunks: Chunk[] = [];
  let count = 0;
  let last = { end: 0, number: 0 };
  for await (const line of readLines(inputPath)) {
    if (chunks.length === 0 || count === lines) {
      chunks.push({ index: chunks.length, start: last.end, end: last.end, firstLine: last.number + 1 });
      count = 0;
    }
    count += 1;
    chunks.at(-1)!.end = line.end;
    last = line;
  }
  return chunks;
}

type PartKind = 'output' | 'error';

/** Where a run of a chunk leaves its output or error part. */
export const partPath = (dir: string, batchId: string, index: number, token: string, kind: PartKind): string =>
  join(dir, `${batchId}.${String(index).padStart(6, '0')}.${token}.${kind}.part`);

/** Removes every part of a batch's chunks (those of runs that lost included). */
export async function removeParts(dir: string, batchId: string): Promise<void> {
  for (const name of await readdir(dir))
    if (name.startsWith(`${batchId}.`) && (name.endsWith('.part') || name.endsWith('.tmp')))
      await rm(join(dir, name), { force: true });
}

export interface ChunkOptions {
  core: CoreContext;
  runner: EndpointRunner;
  inputPath: string;
  dir: string;
  batchId: string;
  inFlight: number;
  signal: AbortSignal;
  /** Answer every request with this error instead of running it (the window passed; the chunk could not run). */
  answerAll?: { code: string; message: string };
}

/**
 * Runs a chunk's requests, a window of them in flight, and writes its parts (an empty one is not
 * written). Throws when stopped (a shutdown, a cancel): nothing of that run is kept.
 */
export async function runChunk(chunk: Chunk, options: ChunkOptions): Promise<ChunkResult> {
  const { signal } = options;
  const token = randomBytes(6).toString('hex');
  const path = (kind: PartKind) => partPath(options.dir, options.batchId, chunk.index, token, kind);
  const handles: Partial<Record<PartKind, FileHandle>> = {};
  const result: ChunkResult = { token, completed: 0, failed: 0, inputTokens: 0 };
  const write = async (answer: Answer) => {
    const handle = (handles[answer.line] ??= await open(`${path(answer.line)}.tmp`, 'w'));
    await handle.write(answer.text);
    if (answer.line === 'output') result.completed += 1;
    else result.failed += 1;
    result.inputTokens! += answer.inputTokens;
  };
  const window: Promise<Answer>[] = [];
  try {
    for await (const line of readLines(options.inputPath, chunk.start, chunk.firstLine)) {
      if (line.end > chunk.end) break;
      signal.throwIfAborted();
      const request = JSON.parse(line.text) as RequestLine;
      const answer: Promise<Answer> = options.answerAll
        ? Promise.resolve({
            line: 'error',
            text: resultLine(options.batchId, line.number, request.custom_id, undefined, options.answerAll),
            inputTokens: 0,
          })
        : answerRequest(options.batchId, line.number, request, options);
      answer.catch(() => undefined);
      window.push(answer);
      if (window.length >= options.inFlight) await write(await window.shift()!);
    }
    while (window.length > 0) await write(await window.shift()!);
    signal.throwIfAborted();
    for (const kind of ['output', 'error'] as const) {
      const handle = handles[kind];
      if (!handle) continue;
      await handle.datasync();
      await handle.close();
      delete handles[kind];
      await rename(`${path(kind)}.tmp`, path(kind));
    }
    return result;
  } finally {
    await Promise.allSettled(window);
    for (const kind of ['output', 'error'] as const) {
      const handle = handles[kind];
      if (!handle) continue;
      await handle.close().catch(() => undefined);
      await rm(`${path(kind)}.tmp`, { force: true });
    }
  }
}
