/**
 * `onnx-gateway embed --server URL` as a real process against a real server over HTTP (one
 * server, tiny embedder): the vectors equal the in-process path's, a server that takes fewer
 * requests a batch than asked has the batch cut at its limit, `--resume` after a torn run adds
 * every missing id once, a request the server fails is named and left out, and a wrong key is
 * told plainly.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import type { Server } from '../../src/main.js';
import { startServer, testKey } from '../helpers/server.js';

const dir = mkdtempSync(join(tmpdir(), 'onnx-gateway-embed-server-'));
let server: Server;
let url: string;
beforeAll(async () => {
  // A batch limit under the inputs' count: the command learns it from the refusal.
  server = await startServer({ models: ['tiny-embedder'], workers: 1, batchMaxRequests: 25 });
  url = await server.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(() => server?.close());

function embedCommand(args: string[]) {
  const child = spawn(
    process.execPath,
    ['dist/cli/index.js', 'embed', ...args, '--model', 'tiny-embedder', '--models-dir', inject('tinyModelsDir')],
    { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ONNX_GATEWAY_API_KEY: '' } },
  );
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { exited, stderr: () => stderr };
}

const read = (path: string) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { id: string; embedding: number[] });

it('writes the in-process vectors, cut at the server limit, and resumes without repeating an id', async () => {
  const texts = Array.from({ length: 40 }, (_, i) => `input ${i}: ${'a few words more '.repeat(1 + (i % 6))}`);
  writeFileSync(join(dir, 'in.txt'), texts.join('\n') + '\n');
  const local = embedCommand([join(dir, 'in.txt'), '--output', join(dir, 'local.jsonl'), '--workers', '1']);
  const remotePath = join(dir, 'remote.jsonl');
  const remote = embedCommand([join(dir, 'in.txt'), '--output', remotePath, '--server', url, '--api-key', testKey]);
  expect(await local.exited, local.stderr()).toBe(0);
  expect(await remote.exited, remote.stderr()).toBe(0);
  expect(remote.stderr()).toContain('at most 25 requests a batch');
  const expected = read(join(dir, 'local.jsonl'));
  const got = read(remotePath);
  expect(got.map((v) => v.id)).toEqual(texts.map((_, i) => String(i + 1)));
  got.forEach((v, i) => {
    expect(v.embedding).toHaveLength(32);
    v.embedding.forEach((x, d) => expect(Math.abs(x - expected[i]!.embedding[d]!)).toBeLessThan(1e-6));
  });

  // A run that stopped after 15 inputs, killed while writing the next line.
  const head = readFileSync(remotePath, 'utf8').split('\n').slice(0, 15).join('\n') + '\n';
  writeFileSync(remotePath, `${head}{"id":"16","embe`);
  const resumed = embedCommand([
    join(dir, 'in.txt'),
    '--output',
    remotePath,
    '--resume',
    '--server',
    `${url}/v1`,
    '--api-key',
    testKey,
    '--batch-lines',
    '10',
  ]);
  expect(await resumed.exited, resumed.stderr()).toBe(0);
  expect(resumed.stderr()).toMatch(/embedded 25 inputs/);
  const after = read(remotePath);
  expect(after.map((v) => v.id)).toEqual(texts.map((_, i) => String(i + 1)));
  after.forEach((v, i) =>
    v.embedding.forEach((x, d) => expect(Math.abs(x - expected[i]!.embedding[d]!)).toBeLessThan(1e-6)),
  );
  // The batches' files were deleted from the server once read.
  const files = await fetch(`${url}/v1/files`, { headers: { authorization: `Bearer ${testKey}` } });
  expect(((await files.json()) as { data: unknown[] }).data).toEqual([]);
});

it('names the inputs the server failed and leaves them out; a wrong key is refused plainly', async () => {
  const long = `a long input ${'with many more words about music and food '.repeat(30)}`;
  writeFileSync(join(dir, 'long.txt'), `short one\n${long}\nshort two\n`);
  const output = join(dir, 'refused.jsonl');
  const run = embedCommand([
    join(dir, 'long.txt'),
    '--output',
    output,
    '--server',
    url,
    '--api-key',
    testKey,
    '--long-inputs',
    'refuse',
  ]);
  expect(await run.exited).toBe(1);
  expect(run.stderr()).toMatch(/input "2" failed \(400: .*/);
  expect(run.stderr()).toContain('1 inputs failed on the server');
  expect(read(output).map((v) => v.id)).toEqual(['1', '3']);

  const wrong = embedCommand([
    join(dir, 'long.txt'),
    '--output',
    join(dir, 'wrong.jsonl'),
    '--server',
    url,
    '--api-key',
    'not-the-key',
  ]);
  expect(await wrong.exited).toBe(1);
  expect(wrong.stderr()).toContain('refused the API key (401');
  expect(wrong.stderr()).toContain('--api-key');
});
