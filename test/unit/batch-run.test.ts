/**
 * A batch's run on its own, over a runner that answers without models: answers appended in input
 * order, a stop committed where it stopped, a torn write after the last commit cut back on resume
 * (what a SIGKILL leaves), failures in the error file, and the input file's checks.
 */
import { appendFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expireRemaining, runRequests } from '../../src/batch/run.js';
import { BatchStore } from '../../src/batch/store.js';
import type { BatchRecord, EndpointRunner } from '../../src/batch/types.js';
import { validateInput } from '../../src/batch/validate.js';
import type { CoreContext } from '../../src/core/context.js';
import { openDatabase } from '../../src/sqlite.js';

const core = {} as CoreContext;

function setUp(lines: string[]) {
  const dir = mkdtempSync(join(tmpdir(), 'onnx-gateway-batch-run-'));
  const inputPath = join(dir, 'input.jsonl');
  writeFileSync(inputPath, lines.join('\n') + '\n');
  const store = new BatchStore(openDatabase(':memory:'));
  const now = Math.floor(Date.now() / 1000);
  store.insertBatch({
    id: 'batch_test',
    owner: 'o',
    endpoint: '/e',
    inputFileId: 'file-x',
    completionWindow: '24h',
    status: 'validating',
    metadata: null,
    createdAt: now,
    expiresAt: now + 3600,
  } as BatchRecord);
  store.startRun('batch_test', lines.length, now);
  const paths = { inputPath, outputPath: join(dir, 'out.part'), errorPath: join(dir, 'err.part') };
  return { store, paths, record: () => store.batch('batch_test')! };
}

const request = (i: number, input: string) =>
  JSON.stringify({ custom_id: `id-${i}`, method: 'POST', url: '/e', body: { input } });

const echo: EndpointRunner = async (_core, body) => {
  const input = (body as { input: string }).input;
  return input === 'bad'
    ? {
        ok: false,
        status: 400,
        body: '{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":"invalid_request"}}',
      }
    : { ok: true, status: 200, body: JSON.stringify({ echo: input }) };
};

const readJsonl = (path: string) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map(
      (line) =>
        JSON.parse(line) as {
          id: string;
          custom_id: string;
          response: { status_code: number; body: unknown } | null;
          error: { code: string } | null;
        },
    );

describe('runRequests', () => {
  it('appends answers in input order, failures to the error file, and commits the counts', async () => {
    const { store, paths, record } = setUp(
      Array.from({ length: 30 }, (_, i) => request(i, i % 10 === 3 ? 'bad' : `t${i}`)),
    );
    const end = await runRequests(record(), {
      store,
      core,
      runner: echo,
      ...paths,
      inFlight: 4,
      signal: new AbortController().signal,
    });
    expect(end).toBe('done');
    const output = readJsonl(paths.outputPath);
    const errors = readJsonl(paths.errorPath);
    expect(output.map((l) => l.custom_id)).toEqual(
      Array.from({ length: 30 }, (_, i) => i)
        .filter((i) => i % 10 !== 3)
        .map((i) => `id-${i}`),
    );
    expect(output[0]!.response).toMatchObject({ status_code: 200, body: { echo: 't0' } });
    expect(errors.map((l) => [l.custom_id, l.response!.status_code])).toEqual([
      ['id-3', 400],
      ['id-13', 400],
      ['id-23', 400],
    ]);
    expect(record()).toMatchObject({ completed: 27, failed: 3 });
    expect(record().progress.outputBytes).toBe(readFileSync(paths.outputPath).length);
  });

  it('resumes a stopped run where it committed, cutting back what was written after: each request once', async () => {
    const count = 40;
    const { store, paths, record } = setUp(Array.from({ length: count }, (_, i) => request(i, `t${i}`)));
    const controller = new AbortController();
    let calls = 0;
    const stopping: EndpointRunner = async (c, body, signal) => {
      calls += 1;
      if (calls === 15) controller.abort();
      if (signal.aborted) throw new Error('stopped');
      return echo(c, body, signal);
    };
    expect(
      await runRequests(record(), { store, core, runner: stopping, ...paths, inFlight: 3, signal: controller.signal }),
    ).toBe('stopped');
    const stopped = record();
    expect(stopped.progress.nextLine).toBeGreaterThan(0);
    expect(stopped.progress.nextLine).toBeLessThan(count);
    expect(stopped.completed).toBe(stopped.progress.nextLine);
    // A killed process may have written answers it never committed, even half a line.
    appendFileSync(paths.outputPath, '{"id":"batch_req_torn","custom_id":"id-');

    expect(
      await runRequests(record(), {
        store,
        core,
        runner: echo,
        ...paths,
        inFlight: 3,
        signal: new AbortController().signal,
      }),
    ).toBe('done');
    const output = readJsonl(paths.outputPath);
    expect(output.map((l) => l.custom_id)).toEqual(Array.from({ length: count }, (_, i) => `id-${i}`));
    expect(new Set(output.map((l) => l.id)).size).toBe(count);
    expect(record()).toMatchObject({ completed: count, failed: 0 });
  });

  it('retries a request whose endpoint says "later", and answers it', async () => {
    const { store, paths, record } = setUp([request(0, 'a')]);
    let calls = 0;
    const busy: EndpointRunner = async (c, body, signal) => {
      calls += 1;
      if (calls < 3) throw new Error('full');
      return echo(c, body, signal);
    };
    await runRequests(record(), {
      store,
      core,
      runner: busy,
      ...paths,
      inFlight: 1,
      signal: new AbortController().signal,
    });
    expect(calls).toBe(3);
    expect(readJsonl(paths.outputPath).map((l) => l.custom_id)).toEqual(['id-0']);
  });

  it('answers the requests an expired batch did not reach with batch_expired', async () => {
    const { store, paths, record } = setUp(Array.from({ length: 5 }, (_, i) => request(i, `t${i}`)));
    const end = await runRequests(record(), {
      store,
      core,
      runner: echo,
      ...paths,
      inFlight: 1,
      signal: new AbortController().signal,
      now: () => record().expiresAt + 1,
    });
    expect(end).toBe('expired');
    await expireRemaining(record(), { store, ...paths, inFlight: 1, signal: new AbortController().signal });
    const errors = readJsonl(paths.errorPath);
    expect(errors.map((l) => [l.custom_id, l.error!.code, l.response])).toEqual(
      Array.from({ length: 5 }, (_, i) => [`id-${i}`, 'batch_expired', null]),
    );
    expect(record()).toMatchObject({ completed: 0, failed: 5 });
  });
});

describe('validateInput', () => {
  it('names each bad line, and counts the requests of a good file', async () => {
    const { paths } = setUp([
      request(0, 'a'),
      '',
      '[1, 2]',
      request(0, 'b'),
      JSON.stringify({ custom_id: 'x', method: 'POST', url: '/e', body: 'text' }),
      JSON.stringify({ custom_id: '', method: 'POST', url: '/e', body: {} }),
    ]);
    const result = await validateInput(paths.inputPath, '/e', 100);
    expect(result.errors.map((e) => [e.line, e.code, e.param])).toEqual([
      [3, 'invalid_request', null],
      [4, 'duplicate_custom_id', 'custom_id'],
      [5, 'invalid_request', 'body'],
      [6, 'missing_required_parameter', 'custom_id'],
    ]);
    const good = setUp([request(0, 'a'), request(1, 'b')]);
    expect(await validateInput(good.paths.inputPath, '/e', 100)).toEqual({ total: 2, errors: [] });
    expect((await validateInput(good.paths.inputPath, '/e', 1)).errors.map((e) => e.code)).toEqual([
      'too_many_requests',
    ]);
  });
});
