/**
 * `onnx-gateway embed --server URL`: the inputs embedded by a running server's Files and Batch
 * APIs instead of by models loaded here. The inputs are written as batch input files (one
 * /v1/embeddings request a line, its custom_id the input's id, its vector asked for as base64 so
 * that the float32 values arrive bit for bit), and each file is uploaded and run as a batch in
 * turn. Its output file is streamed back and written to OUT as the in-process path writes it, in
 * input order; the requests that failed (its error file) are reported and left out, so that
 * `--resume` tries them again.
 *
 * A batch holds at most `batchLines` requests (the server refuses more than its batchMaxRequests:
 * when it does, the batch is cut again at the limit the refusal names) and 100 MB; an input whose
 * id the batch already holds starts the next one, as a batch's custom_ids must differ. The next
 * batch is uploaded and created while one runs, so that the server never waits for the command
 * between batches (for the upload, its validation, the download of the last one's answers).
 */
import { closeSync, mkdtempSync, openAsBlob, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import type { EmbeddingSink } from './embed-output.js';
import type { Input } from './embed-inputs.js';

export interface RemoteOptions {
  /** The server's base URL (with or without `/v1`). */
  server: string;
  apiKey?: string;
  model: string;
  dimensions?: number;
  longInputs?: string;
  /** The most requests in one batch. */
  batchLines: number;
  /** How often the batch's status is read. */
  pollMs: number;
}

export interface RemoteRun {
  inputs: AsyncIterable<Input>;
  /** Ids already in OUT (resuming): skipped. */
  done: ReadonlySet<string>;
  sink: EmbeddingSink;
  /** Aborted on Ctrl-C: the running batch is cancelled, and what it answered is written. */
  signal: AbortSignal;
  /** Inputs answered in this run so far (embedded or failed). */
  progress: (answered: number) => void;
  warn: (message: string) => void;
}

/** A failure the user can act on: its message is the whole story. */
export class RemoteError extends Error {}

/** The most bytes of requests in one batch input file, under the server's default fileMaxMb (200). */
const maxBatchBytes = 100 * 1024 * 1024;
/** Failed requests named one by one before the rest are only counted. */
const listedFailures = 10;
/** Rows handed to the sink at once. */
const sliceRows = 256;
/** Batches on the server at once: the one whose answers are awaited, and the next. */
const batchesInFlight = 2;

interface BatchObject {
  id: string;
  status: string;
  output_file_id?: string;
  error_file_id?: string;
  errors?: { data: { code: string; message: string; line: number | null }[] };
  request_counts: { total: number; completed: number; failed: number };
}

const finalStatuses = new Set(['completed', 'failed', 'expired', 'cancelled']);

/** Embeds every input not in `run.done` on the server; the counts of inputs embedded and failed. */
export async function embedOnServer(
  options: RemoteOptions,
  run: RemoteRun,
): Promise<{ embedded: number; failed: number }> {
  const client = new GatewayClient(options.server, options.apiKey);
  await client.checkModel(options.model);
  const dir = mkdtempSync(join(tmpdir(), 'onnx-gateway-embed-'));
  const counts = { embedded: 0, failed: 0 };
  let limit = options.batchLines;
  let parts = 0;
  const newPart = () => new PartFile(join(dir, `batch-${parts++}.jsonl`));

  // Batches created on the server, oldest first: their answers are written in this order, and
  // each is created after the one before it, so that the server runs them in this order too.
  const inFlight: Promise<Submitted>[] = [];
  const submit = (part: PartFile): void => {
    part.close();
    const previous = inFlight.at(-1)?.catch(() => undefined);
    const submitted = (previous ?? Promise.resolve()).then(() => submitBatch(client, part));
    submitted.catch(() => undefined);
    inFlight.push(submitted);
  };
  const settleOldest = async (): Promise<void> => {
    const submitted = await inFlight.shift()!;
    const refusedAbove = await finishBatch(client, options, run, submitted, counts);
    if (refusedAbove !== undefined) await runCut(submitted.part, refusedAbove);
  };
  const runPart = async (part: PartFile): Promise<void> => {
    submit(part);
    while (inFlight.length >= batchesInFlight) await settleOldest();
  };
  // The server takes fewer requests a batch: the rest go at its limit, and this one again, cut
  // (each piece run to its end before the batch after it is read, to keep the input's order).
  const runCut = async (part: PartFile, most: number): Promise<void> => {
    if (most < limit) {
      limit = most;
      run.warn(`the server takes at most ${limit} requests a batch; sending batches of ${limit}.`);
    }
    const lines = readFileSync(part.path, 'utf8').split('\n');
    for (let start = 0; start < part.ids.length && !run.signal.aborted; start += most) {
      const piece = newPart();
      for (let i = start; i < Math.min(start + most, part.ids.length); i++) piece.add(part.ids[i]!, `${lines[i]}\n`);
      piece.close();
      const refusedAbove = await finishBatch(client, options, run, await submitBatch(client, piece), counts);
      if (refusedAbove !== undefined) await runCut(piece, refusedAbove);
    }
  };

  try {
    let part = newPart();
    for await (const input of run.inputs) {
      if (run.signal.aborted) break;
      if (run.done.has(input.id)) continue;
      const line = requestLine(input, options);
      if (part.ids.length >= limit || part.bytes + Buffer.byteLength(line) > maxBatchBytes || part.has(input.id)) {
        await runPart(part);
        part = newPart();
        if (run.signal.aborted) break;
      }
      part.add(input.id, line);
    }
    if (!run.signal.aborted && part.ids.length > 0) submit(part);
    else part.close();
    // Ctrl-C: each batch still on the server is cancelled in turn, and what it answered written.
    while (inFlight.length > 0) await settleOldest();
  } finally {
    // After a failure: the batches not read are cancelled and their files deleted.
    await Promise.all(inFlight.splice(0).map((submitted) => abandonBatch(client, submitted)));
    rmSync(dir, { recursive: true, force: true });
  }
  return counts;
}

function requestLine(input: Input, options: RemoteOptions): string {
  const body: Record<string, unknown> = { model: options.model, input: input.text, encoding_format: 'base64' };
  if (options.dimensions !== undefined) body.dimensions = options.dimensions;
  if (options.longInputs !== undefined) body.long_inputs = options.longInputs;
  return `${JSON.stringify({ custom_id: input.id, method: 'POST', url: '/v1/embeddings', body })}\n`;
}

/** One batch's input file on disk, written as the inputs are read. */
class PartFile {
  readonly ids: string[] = [];
  bytes = 0;
  private readonly seen = new Set<string>();
  private fd?: number;

  constructor(readonly path: string) {
    this.fd = openSync(path, 'w');
  }

  has(id: string): boolean {
    return this.seen.has(id);
  }

  add(id: string, line: string): void {
    writeSync(this.fd!, line);
    this.ids.push(id);
    this.seen.add(id);
    this.bytes += Buffer.byteLength(line);
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}

/** A batch input file uploaded and its batch created. */
interface Submitted {
  part: PartFile;
  inputFile: string;
  batch: BatchObject;
}

/** Uploads one batch input file and creates its batch (the file is deleted should that fail). */
async function submitBatch(client: GatewayClient, part: PartFile): Promise<Submitted> {
  const inputFile = await client.upload(part.path);
  try {
    const batch = await client.call<BatchObject>('POST', '/v1/batches', {
      input_file_id: inputFile,
      endpoint: '/v1/embeddings',
      completion_window: '24h',
      metadata: { source: 'onnx-gateway embed' },
    });
    return { part, inputFile, batch };
  } catch (error) {
    await client.deleteFile(inputFile);
    throw error;
  }
}

/** Cancels a batch whose answers will not be read, and deletes its input file. */
async function abandonBatch(client: GatewayClient, submitting: Promise<Submitted>): Promise<void> {
  const submitted = await submitting.catch(() => undefined);
  if (!submitted) return;
  if (!finalStatuses.has(submitted.batch.status))
    await client.call('POST', `/v1/batches/${submitted.batch.id}/cancel`).catch(() => undefined);
  await client.deleteFile(submitted.inputFile);
}

/**
 * Waits for a created batch to end and writes its answers; the server's limit when it refused the
 * batch as too large, else undefined. The batch's files are deleted from the server once read.
 */
async function finishBatch(
  client: GatewayClient,
  options: RemoteOptions,
  run: RemoteRun,
  { part, inputFile, batch: created }: Submitted,
  counts: { embedded: number; failed: number },
): Promise<number | undefined> {
  let batch = created;
  try {
    const before = counts.embedded + counts.failed;
    let cancelled = false;
    // Read soon after the start (a small batch ends at once), then every pollMs.
    let wait = 100;
    for (;;) {
      run.progress(before + batch.request_counts.completed + batch.request_counts.failed);
      if (finalStatuses.has(batch.status)) break;
      if (run.signal.aborted && !cancelled) {
        // Ctrl-C: the server stops the batch and keeps what it answered, which is written below.
        cancelled = true;
        batch = await client.call<BatchObject>('POST', `/v1/batches/${batch.id}/cancel`);
        continue;
      }
      await sleep(wait, undefined, { signal: cancelled ? undefined : run.signal }).catch(() => undefined);
      wait = Math.min(wait * 2, options.pollMs);
      batch = await client.call<BatchObject>('GET', `/v1/batches/${batch.id}`);
    }
    if (batch.status === 'failed') {
      const errors = batch.errors?.data ?? [];
      const tooMany = errors.find((error) => error.code === 'too_many_requests');
      const most = tooMany && /more than (\d+)/.exec(tooMany.message);
      if (most && Number(most[1]) > 0 && Number(most[1]) < part.ids.length) return Number(most[1]);
      throw new RemoteError(
        `the server failed batch ${batch.id}: ${errors.map((e) => (e.line ? `line ${e.line}: ${e.message}` : e.message)).join('; ')}`,
      );
    }
    if (batch.output_file_id) {
      counts.embedded += await writeOutput(client, batch.output_file_id, part.ids, run.sink);
      await client.deleteFile(batch.output_file_id);
    }
    if (batch.error_file_id) {
      counts.failed += await reportErrors(client, batch.error_file_id, run.warn, counts.failed);
      await client.deleteFile(batch.error_file_id);
    }
    return undefined;
  } finally {
    await client.deleteFile(inputFile);
  }
}

/** Writes a batch's output file to the sink, in its order (the input's); the rows written. */
async function writeOutput(client: GatewayClient, fileId: string, ids: string[], sink: EmbeddingSink): Promise<number> {
  const position = new Map(ids.map((id, i) => [id, i]));
  let last = -1;
  let written = 0;
  let slice: { ids: string[]; rows: Float32Array[] } = { ids: [], rows: [] };
  const flush = () => {
    if (slice.ids.length === 0) return;
    const dimensions = slice.rows[0]!.length;
    const vectors = new Float32Array(slice.ids.length * dimensions);
    slice.rows.forEach((row, i) => {
      if (row.length !== dimensions)
        throw new RemoteError(`the server answered vectors of ${row.length} and ${dimensions} dimensions.`);
      vectors.set(row, i * dimensions);
    });
    sink.write(slice.ids, vectors, dimensions);
    written += slice.ids.length;
    slice = { ids: [], rows: [] };
  };
  for await (const text of client.lines(fileId)) {
    const line = JSON.parse(text) as {
      custom_id: string;
      response: { body: { data: { embedding: string | number[] }[] } } | null;
    };
    const at = position.get(line.custom_id);
    if (at === undefined || at <= last)
      throw new RemoteError(`the batch's output has "${line.custom_id}" out of the input's order.`);
    last = at;
    const embedding = line.response?.body.data[0]?.embedding;
    if (embedding === undefined) throw new RemoteError(`the batch's output has no vector for "${line.custom_id}".`);
    slice.ids.push(line.custom_id);
    slice.rows.push(typeof embedding === 'string' ? float32FromBase64(embedding) : Float32Array.from(embedding));
    if (slice.ids.length >= sliceRows) flush();
  }
  flush();
  return written;
}

/** The little-endian float32 bytes of a base64 vector. */
function float32FromBase64(text: string): Float32Array {
  const bytes = Buffer.from(text, 'base64');
  const row = new Float32Array(bytes.length / 4);
  for (let i = 0; i < row.length; i++) row[i] = bytes.readFloatLE(i * 4);
  return row;
}

/** Names the failed requests of an error file (the first few of the run), and counts them. */
async function reportErrors(
  client: GatewayClient,
  fileId: string,
  warn: (message: string) => void,
  failedBefore: number,
): Promise<number> {
  let failed = 0;
  for await (const text of client.lines(fileId)) {
    const line = JSON.parse(text) as {
      custom_id: string;
      response: { status_code: number; body: { error?: { message?: string } } } | null;
      error: { code: string; message: string } | null;
    };
    failed += 1;
    if (failedBefore + failed > listedFailures) continue;
    const why = line.error
      ? `${line.error.code}: ${line.error.message}`
      : `${line.response?.status_code}: ${line.response?.body.error?.message ?? 'failed'}`;
    warn(`input "${line.custom_id}" failed (${why})`);
  }
  if (failedBefore <= listedFailures && failedBefore + failed > listedFailures)
    warn('(further failures are counted, not listed)');
  return failed;
}

/** The server's Files and Batch APIs over HTTP. */
class GatewayClient {
  private readonly base: string;

  constructor(
    server: string,
    private readonly apiKey?: string,
  ) {
    this.base = server.replace(/\/+$/, '').replace(/\/v1$/, '');
  }

  /** The model must be one the server serves; this also proves the key before any input is read. */
  async checkModel(model: string): Promise<void> {
    try {
      await this.call('GET', `/v1/models/${model.split('/').map(encodeURIComponent).join('/')}`);
    } catch (error) {
      if (error instanceof StatusError && error.status === 404)
        throw new RemoteError(`${this.base} does not serve the model "${model}".`);
      throw error;
    }
  }

  async upload(path: string): Promise<string> {
    const form = new FormData();
    form.append('purpose', 'batch');
    form.append('file', await openAsBlob(path), 'embed.jsonl');
    return (await this.call<{ id: string }>('POST', '/v1/files', form)).id;
  }

  /** Deletes a file of the batch; a failure only leaves it on the server. */
  async deleteFile(id: string): Promise<void> {
    await this.call('DELETE', `/v1/files/${id}`).catch(() => undefined);
  }

  async call<T>(method: string, path: string, body?: object): Promise<T> {
    const response = await this.send(method, path, body);
    return (await response.json()) as T;
  }

  /** A file's content, a line at a time, streamed. */
  async *lines(fileId: string): AsyncGenerator<string> {
    const response = await this.send('GET', `/v1/files/${fileId}/content`);
    const stream = Readable.fromWeb(response.body as WebReadableStream<Uint8Array>);
    for await (const line of createInterface({ input: stream, crlfDelay: Infinity })) if (line !== '') yield line;
  }

  private async send(method: string, path: string, body?: object): Promise<Response> {
    const headers: Record<string, string> = {};
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`;
    const form = body instanceof FormData;
    if (body !== undefined && !form) headers['content-type'] = 'application/json';
    let response: Response;
    try {
      response = await fetch(`${this.base}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : form ? body : JSON.stringify(body),
      });
    } catch (error) {
      const cause = (error as { cause?: { message?: string } }).cause?.message ?? (error as Error).message;
      throw new RemoteError(`can not reach ${this.base}: ${cause}`);
    }
    if (response.ok) return response;
    const text = await response.text();
    let message = text.slice(0, 500);
    try {
      message = (JSON.parse(text) as { error: { message: string } }).error.message;
    } catch {
      // not the API's error body: its text as it is
    }
    if (response.status === 401)
      throw new RemoteError(
        `${this.base} refused the API key (401: ${message}) Pass it with --api-key, or in ONNX_GATEWAY_API_KEY.`,
      );
    throw new StatusError(
      response.status,
      `${this.base} answered ${method} ${path} with ${response.status}: ${message}`,
    );
  }
}

class StatusError extends RemoteError {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}
