/**
 * The embed command's client of a server's Batch API, against a stand-in server that records what
 * it is sent: each request line as the in-process path would embed it (custom_id the id, base64,
 * dimensions and long_inputs passed on), a repeated id starting the next batch, the next batch
 * created while one runs, and Ctrl-C cancelling the running batches, whose kept answers are
 * written, and deleting their files.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterEach, expect, it } from 'vitest';
import { openSink } from '../../src/cli/embed-output.js';
import { embedOnServer } from '../../src/cli/embed-remote.js';
import type { Input } from '../../src/cli/embed-inputs.js';

interface StandIn {
  url: string;
  server: Server;
  batches: { id: string; lines: { custom_id: string; body: Record<string, unknown> }[] }[];
  cancelled: string[];
  deleted: string[];
  /** Whether a batch stays in progress until it is cancelled. */
  holdUntilCancel: boolean;
  /** What the client did, in order: `create <batch>`, `read <file>`. */
  log: string[];
}

let standIn: StandIn | undefined;
afterEach(() => standIn?.server.close());

/** The vector the stand-in answers for a text: its length and first char code, as float32. */
const vectorOf = (text: string) => Float32Array.from([text.length / 10, text.charCodeAt(0) / 1000, 0.1]);

/** A stand-in server; its batches complete when created, after `readsToComplete` reads, or never (`hold`). */
async function startStandIn(hold: boolean, readsToComplete = 0): Promise<StandIn> {
  const files = new Map<string, string>();
  const state: StandIn = {
    url: '',
    server: createServer(),
    batches: [],
    cancelled: [],
    deleted: [],
    holdUntilCancel: hold,
    log: [],
  };
  const status = new Map<string, string>();
  const reads = new Map<string, number>();
  const answer = (batchId: string, count: number) => {
    const batch = state.batches.find((b) => b.id === batchId)!;
    const text = batch.lines
      .slice(0, count)
      .map((line) => {
        const embedding = Buffer.from(vectorOf(line.body.input as string).buffer).toString('base64');
        return JSON.stringify({
          custom_id: line.custom_id,
          response: { status_code: 200, body: { data: [{ embedding }] } },
          error: null,
        });
      })
      .join('\n');
    files.set(`${batchId}-out`, `${text}\n`);
    return `${batchId}-out`;
  };
  state.server.on('request', (req: IncomingMessage, res) => {
    void (async () => {
      const url = req.url!;
      const json = (value: unknown) =>
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(value));
      const batchObject = (id: string) => {
        const batch = state.batches.find((b) => b.id === id)!;
        const s = status.get(id)!;
        const done = s === 'completed' ? batch.lines.length : s === 'cancelled' ? 2 : 0;
        return {
          id,
          status: s,
          request_counts: { total: batch.lines.length, completed: done, failed: 0 },
          ...(s === 'completed' || s === 'cancelled' ? { output_file_id: answer(id, done) } : {}),
        };
      };
      if (req.method === 'GET' && url.startsWith('/v1/models/')) return json({ id: 'm' });
      if (req.method === 'POST' && url === '/v1/files') {
        const form = await new Request('http://stand-in/', {
          method: 'POST',
          headers: req.headers as Record<string, string>,
          body: Readable.toWeb(req) as ReadableStream,
          duplex: 'half',
        }).formData();
        const id = `file-${files.size}`;
        files.set(id, await (form.get('file') as Blob).text());
        return json({ id });
      }
      if (req.method === 'POST' && url === '/v1/batches') {
        let body = '';
        for await (const chunk of req) body += String(chunk);
        const { input_file_id } = JSON.parse(body) as { input_file_id: string };
        const id = `batch-${state.batches.length}`;
        state.batches.push({
          id,
          lines: files
            .get(input_file_id)!
            .split('\n')
            .filter(Boolean)
            .map((line) => JSON.parse(line) as StandIn['batches'][number]['lines'][number]),
        });
        state.log.push(`create ${id}`);
        status.set(id, state.holdUntilCancel || readsToComplete > 0 ? 'in_progress' : 'completed');
        return json(batchObject(id));
      }
      const cancel = /^\/v1\/batches\/([^/]+)\/cancel$/.exec(url);
      if (cancel) {
        state.cancelled.push(cancel[1]!);
        status.set(cancel[1]!, 'cancelled');
        return json(batchObject(cancel[1]!));
      }
      const batch = /^\/v1\/batches\/([^/]+)$/.exec(url);
      if (batch) {
        const id = batch[1]!;
        reads.set(id, (reads.get(id) ?? 0) + 1);
        if (!state.holdUntilCancel && readsToComplete > 0 && reads.get(id)! >= readsToComplete)
          status.set(id, 'completed');
        return json(batchObject(id));
      }
      const content = /^\/v1\/files\/([^/]+)\/content$/.exec(url);
      if (content) {
        state.log.push(`read ${content[1]!}`);
        return res.writeHead(200).end(files.get(content[1]!));
      }
      const file = /^\/v1\/files\/([^/]+)$/.exec(url);
      if (req.method === 'DELETE' && file) {
        state.deleted.push(file[1]!);
        return json({ deleted: true });
      }
      res.writeHead(404).end('{"error":{"message":"no route"}}');
    })();
  });
  await new Promise<void>((resolve) => state.server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(state.server.address() as { port: number }).port}`;
  return state;
}

async function* inputsOf(inputs: Input[]) {
  for (const input of inputs) yield await Promise.resolve(input);
}

const readJsonl = (path: string) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { id: string; embedding: number[] });

const options = (url: string) => ({ server: `${url}/v1/`, model: 'm', batchLines: 100, pollMs: 20 });

it('sends each input as the in-process path embeds it and writes the vectors in input order', async () => {
  standIn = await startStandIn(false);
  const output = join(mkdtempSync(join(tmpdir(), 'onnx-gateway-embed-remote-')), 'out.jsonl');
  const sink = openSink(output, false);
  const inputs = [
    { id: 'a', text: 'first' },
    { id: 'b', text: 'second one' },
    { id: 'a', text: 'the id again' },
    { id: 'c', text: 'last' },
  ];
  const counts = await embedOnServer(
    { ...options(standIn.url), dimensions: 3, longInputs: 'chunk' },
    {
      inputs: inputsOf(inputs),
      done: new Set(['c']),
      sink,
      signal: new AbortController().signal,
      progress: () => undefined,
      warn: () => undefined,
    },
  );
  sink.close();
  expect(counts).toEqual({ embedded: 3, failed: 0 });
  // The repeated id went in a batch of its own; the id OUT already holds was not sent.
  expect(standIn.batches.map((b) => b.lines.map((l) => l.custom_id))).toEqual([['a', 'b'], ['a']]);
  expect(standIn.batches[0]!.lines[0]!.body).toEqual({
    model: 'm',
    input: 'first',
    encoding_format: 'base64',
    dimensions: 3,
    long_inputs: 'chunk',
  });
  const written = readJsonl(output);
  expect(written.map((w) => w.id)).toEqual(['a', 'b', 'a']);
  // float32 values as sent, read back at float32.
  written.forEach((w, i) => expect(Float32Array.from(w.embedding)).toEqual(vectorOf(inputs[i]!.text)));
  // Each batch's input and output files are deleted once read.
  expect(standIn.deleted.sort()).toEqual(['batch-0-out', 'batch-1-out', 'file-0', 'file-2']);
});

it('cancels the running batch on Ctrl-C and writes the answers it kept', async () => {
  standIn = await startStandIn(true);
  const output = join(mkdtempSync(join(tmpdir(), 'onnx-gateway-embed-remote-')), 'out.jsonl');
  const sink = openSink(output, false);
  const stop = new AbortController();
  const counts = await embedOnServer(options(standIn.url), {
    inputs: inputsOf(Array.from({ length: 5 }, (_, i) => ({ id: `id-${i}`, text: `text ${i}` }))),
    done: new Set(),
    sink,
    signal: stop.signal,
    // Ctrl-C once the batch is seen running.
    progress: () => stop.abort(),
    warn: () => undefined,
  });
  sink.close();
  expect(standIn.cancelled).toEqual(['batch-0']);
  expect(counts.embedded).toBe(2);
  expect(readJsonl(output).map((w) => w.id)).toEqual(['id-0', 'id-1']);
  expect(standIn.deleted.sort()).toEqual(['batch-0-out', 'file-0']);
});

it('creates the next batch while one runs, and writes every answer in input order', async () => {
  standIn = await startStandIn(false, 3);
  const output = join(mkdtempSync(join(tmpdir(), 'onnx-gateway-embed-remote-')), 'out.jsonl');
  const sink = openSink(output, false);
  const inputs = Array.from({ length: 7 }, (_, i) => ({ id: `id-${i}`, text: `text number ${i}` }));
  const counts = await embedOnServer(
    { ...options(standIn.url), batchLines: 3 },
    {
      inputs: inputsOf(inputs),
      done: new Set(),
      sink,
      signal: new AbortController().signal,
      progress: () => undefined,
      warn: () => undefined,
    },
  );
  sink.close();
  expect(counts).toEqual({ embedded: 7, failed: 0 });
  expect(standIn.batches.map((b) => b.lines.length)).toEqual([3, 3, 1]);
  // Each batch after the first was on the server before the answers of the one before it were read.
  expect(standIn.log).toEqual([
    'create batch-0',
    'create batch-1',
    'read batch-0-out',
    'create batch-2',
    'read batch-1-out',
    'read batch-2-out',
  ]);
  const written = readJsonl(output);
  expect(written.map((w) => w.id)).toEqual(inputs.map((input) => input.id));
  written.forEach((w, i) => expect(Float32Array.from(w.embedding)).toEqual(vectorOf(inputs[i]!.text)));
  // Every input and output file is deleted.
  expect(standIn.deleted.filter((id) => id.startsWith('file-'))).toHaveLength(3);
  expect(standIn.deleted.filter((id) => id.endsWith('-out')).sort()).toEqual([
    'batch-0-out',
    'batch-1-out',
    'batch-2-out',
  ]);
});
