/**
 * `onnx-gateway embed` as a real process over the tiny embedder: a text file and a JSONL file
 * embedded to JSONL, `--resume` after a run cut short (a torn last line included) finishing with
 * every id once and the same vectors, a `.npy` output (read by numpy) resumed after a torn row, and
 * Ctrl-C (SIGINT) leaving a valid file to resume from.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, inject, it } from 'vitest';
import { auth, startServer } from '../helpers/server.js';

const dir = mkdtempSync(join(tmpdir(), 'onnx-gateway-embed-'));

function embedCommand(args: string[]) {
  const child = spawn(
    process.execPath,
    [
      'dist/cli/index.js',
      'embed',
      ...args,
      '--model',
      'tiny-embedder',
      '--models-dir',
      inject('tinyModelsDir'),
      '--workers',
      '1',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited, stderr: () => stderr };
}

const read = (path: string) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { id: string; embedding: number[] });

it('embeds a text file and a JSONL file, and resumes a run cut short without embedding anything twice', async () => {
  const texts = Array.from({ length: 700 }, (_, i) => `input number ${i}, ${'about something '.repeat(i % 5)}`);
  writeFileSync(join(dir, 'in.txt'), texts.join('\n') + '\n');
  const full = join(dir, 'full.jsonl');
  const run = embedCommand([join(dir, 'in.txt'), '--output', full]);
  expect(await run.exited, run.stderr()).toBe(0);
  const vectors = read(full);
  expect(vectors.map((v) => v.id)).toEqual(texts.map((_, i) => String(i + 1)));
  expect(vectors[0]!.embedding).toHaveLength(32);

  // A run that stopped after 300 inputs, killed in the middle of writing the next line.
  const partial = join(dir, 'partial.jsonl');
  const head = readFileSync(full, 'utf8').split('\n').slice(0, 300).join('\n') + '\n';
  writeFileSync(partial, head + '{"id":"301","embedd');
  const refused = embedCommand([join(dir, 'in.txt'), '--output', partial]);
  expect(await refused.exited).toBe(2);
  const resumed = embedCommand([join(dir, 'in.txt'), '--output', partial, '--resume']);
  expect(await resumed.exited, resumed.stderr()).toBe(0);
  const after = read(partial);
  expect(after.map((v) => v.id)).toEqual(vectors.map((v) => v.id));
  after.forEach((v, i) => v.embedding.forEach((x, d) => expect(x).toBeCloseTo(vectors[i]!.embedding[d]!, 5)));

  // JSONL: the text from --field, the id from each record, --dimensions.
  writeFileSync(
    join(dir, 'in.jsonl'),
    texts
      .slice(0, 5)
      .map((body, i) => JSON.stringify({ id: `doc-${i}`, body }))
      .join('\n'),
  );
  const fromJsonl = embedCommand([
    join(dir, 'in.jsonl'),
    '--output',
    join(dir, 'j.jsonl'),
    '--field',
    'body',
    '--dimensions',
    '8',
  ]);
  expect(await fromJsonl.exited, fromJsonl.stderr()).toBe(0);
  const records = read(join(dir, 'j.jsonl'));
  expect(records.map((r) => r.id)).toEqual(['doc-0', 'doc-1', 'doc-2', 'doc-3', 'doc-4']);
  expect(records[0]!.embedding).toHaveLength(8);
  expect(Math.hypot(...records[0]!.embedding)).toBeCloseTo(1, 5);
});

it('writes a .npy file numpy reads, with the ids beside it, and resumes one cut short mid-row', async () => {
  const texts = Array.from({ length: 600 }, (_, i) => `input number ${i}, ${'about something '.repeat(i % 5)}`);
  writeFileSync(join(dir, 'npy.txt'), texts.join('\n') + '\n');
  const reference = join(dir, 'npy-reference.jsonl');
  const asJsonl = embedCommand([join(dir, 'npy.txt'), '--output', reference]);
  expect(await asJsonl.exited, asJsonl.stderr()).toBe(0);
  const expected = read(reference);
  const output = join(dir, 'vectors.npy');
  const run = embedCommand([join(dir, 'npy.txt'), '--output', output]);
  expect(await run.exited, run.stderr()).toBe(0);
  // numpy itself, as a user reads the file.
  const numpy = (path: string) =>
    JSON.parse(
      execFileSync('/usr/bin/python3', [
        '-c',
        'import json, sys, numpy as np; a = np.load(sys.argv[1]); print(json.dumps({"dtype": str(a.dtype), "shape": a.shape, "rows": a.tolist()}))',
        path,
      ]).toString(),
    ) as { dtype: string; shape: number[]; rows: number[][] };
  const loaded = numpy(output);
  expect([loaded.dtype, loaded.shape]).toEqual(['float32', [600, 32]]);
  loaded.rows.forEach((row, i) => row.forEach((x, d) => expect(x).toBeCloseTo(expected[i]!.embedding[d]!, 5)));
  const ids = join(dir, 'vectors.ids.txt');
  expect(readFileSync(ids, 'utf8')).toBe(texts.map((_, i) => `${i + 1}\n`).join(''));

  // A run killed after 300 rows, in the middle of the next row and before its ids.
  const bytes = readFileSync(output);
  const rowBytes = 32 * 4;
  writeFileSync(output, bytes.subarray(0, 128 + 300 * rowBytes + 50));
  writeFileSync(
    ids,
    texts
      .slice(0, 300)
      .map((_, i) => `${i + 1}\n`)
      .join('') + '301',
  );
  const refused = embedCommand([join(dir, 'npy.txt'), '--output', output]);
  expect(await refused.exited).toBe(2);
  const resumed = embedCommand([join(dir, 'npy.txt'), '--output', output, '--resume']);
  expect(await resumed.exited, resumed.stderr()).toBe(0);
  expect(resumed.stderr()).toMatch(/embedded 300 inputs/);
  const again = numpy(output);
  expect(again.shape).toEqual([600, 32]);
  again.rows.forEach((row, i) => row.forEach((x, d) => expect(x).toBeCloseTo(expected[i]!.embedding[d]!, 5)));
  expect(readFileSync(ids, 'utf8')).toBe(texts.map((_, i) => `${i + 1}\n`).join(''));
});

it('leaves a valid file on Ctrl-C, which --resume completes', async () => {
  const texts = Array.from(
    { length: 6000 },
    (_, i) => `a longer input number ${i} ${'with more words '.repeat(1 + (i % 9))}`,
  );
  writeFileSync(join(dir, 'big.txt'), texts.join('\n'));
  const output = join(dir, 'interrupted.jsonl');
  const run = embedCommand([join(dir, 'big.txt'), '--output', output]);
  // Interrupted once the first slices are written.
  for (;;) {
    let size = 0;
    try {
      size = statSync(output).size;
    } catch {
      // not created yet
    }
    if (size > 0) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  run.child.kill('SIGINT');
  const code = await run.exited;
  const kept = read(output);
  // Every line whole, in order; the run stopped before the end (or, on a fast machine, finished).
  expect(kept.map((v) => v.id)).toEqual(texts.slice(0, kept.length).map((_, i) => String(i + 1)));
  if (kept.length < texts.length) expect(code).toBe(130);
  const resumed = embedCommand([join(dir, 'big.txt'), '--output', output, '--resume']);
  expect(await resumed.exited, resumed.stderr()).toBe(0);
  expect(read(output).map((v) => v.id)).toEqual(texts.map((_, i) => String(i + 1)));
});

it('embeds inputs past the window in windows with --long-inputs chunk, as the server does', async () => {
  const long = `a long input ${'with many more words about music and food '.repeat(30)}`;
  writeFileSync(join(dir, 'long.txt'), `${long}\nshort input\n`);
  const cut = embedCommand([join(dir, 'long.txt'), '--output', join(dir, 'cut.jsonl')]);
  expect(await cut.exited, cut.stderr()).toBe(0);
  const chunked = embedCommand([
    join(dir, 'long.txt'),
    '--output',
    join(dir, 'chunked.jsonl'),
    '--long-inputs',
    'chunk',
  ]);
  expect(await chunked.exited, chunked.stderr()).toBe(0);
  const [cutLong, cutShort] = read(join(dir, 'cut.jsonl'));
  const [chunkedLong, chunkedShort] = read(join(dir, 'chunked.jsonl'));
  expect(chunkedShort!.embedding).toEqual(cutShort!.embedding);
  expect(chunkedLong!.embedding).not.toEqual(cutLong!.embedding);

  const server = await startServer({ workers: 1 });
  try {
    const res = await server.app.inject({
      method: 'POST',
      url: '/v1/embeddings',
      headers: auth,
      payload: { model: 'tiny-embedder', input: long, long_inputs: 'chunk' },
    });
    const served = res.json<{ data: { embedding: number[] }[] }>().data[0]!.embedding;
    served.forEach((x, d) => expect(chunkedLong!.embedding[d]).toBeCloseTo(x, 6));
  } finally {
    await server.close();
  }

  const refused = embedCommand([join(dir, 'long.txt'), '--output', join(dir, 'no.jsonl'), '--long-inputs', 'split']);
  expect(await refused.exited).toBe(2);
  expect(refused.stderr()).toContain('longInputs');
});
