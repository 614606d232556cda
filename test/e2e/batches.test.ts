/**
 * OpenAI's Files and Batch APIs through the real `openai` SDK, over HTTP on loopback, on the tiny
 * models: upload, create, retrieve, list, cancel, download, as a user's code calls them; the
 * answers checked against OpenAI's specification and against the same requests made online.
 */
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from '../../src/main.js';
import { startServer, testKey } from '../helpers/server.js';
import { expectConforms } from '../helpers/specs.js';

const otherKey = 'other-key-0123456789';
let server: Server;
let baseURL: string;
beforeAll(async () => {
  server = await startServer({ apiKeys: [testKey, otherKey], models: ['tiny-embedder', 'tiny-reranker'] });
  const address = await server.app.listen({ port: 0, host: '127.0.0.1' });
  baseURL = `${address}/v1`;
});
afterAll(() => server?.close());

const client = (apiKey = testKey) => new OpenAI({ baseURL, apiKey, maxRetries: 0 });

interface ResultLine {
  id: string;
  custom_id: string;
  response: { status_code: number; request_id: string; body: Record<string, unknown> } | null;
  error: { code: string; message: string } | null;
}

const jsonl = (lines: unknown[]) => lines.map((line) => JSON.stringify(line)).join('\n') + '\n';

async function upload(lines: unknown[] | string, apiKey = testKey) {
  const text = typeof lines === 'string' ? lines : jsonl(lines);
  return client(apiKey).files.create({ file: await toFile(Buffer.from(text), 'requests.jsonl'), purpose: 'batch' });
}

const finalStatuses = new Set(['completed', 'failed', 'expired', 'cancelled']);

/** Polls the batch until it has ended (the test's own timeout bounds the wait). */
async function ended(id: string, apiKey = testKey) {
  for (;;) {
    const batch = await client(apiKey).batches.retrieve(id);
    if (finalStatuses.has(batch.status)) return batch;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function lines(fileId: string): Promise<ResultLine[]> {
  const response = await client().files.content(fileId);
  return (await response.text())
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as ResultLine);
}

const embedRequest = (customId: string, input: string | string[], extra: object = {}) => ({
  custom_id: customId,
  method: 'POST',
  url: '/v1/embeddings',
  body: { model: 'tiny-embedder', input, encoding_format: 'float', ...extra },
});

describe('the openai SDK', () => {
  it('uploads a file, runs a batch of embeddings and downloads answers equal to the online ones', async () => {
    const texts = Array.from({ length: 40 }, (_, i) => `text number ${i} about ${i % 3 ? 'cats' : 'the sea'}`);
    const file = await upload(texts.map((text, i) => embedRequest(`req-${i}`, text)));
    expectConforms('openai', 'OpenAIFile', file);
    expect(file.purpose).toBe('batch');
    expect(file.bytes).toBeGreaterThan(0);

    const created = await client().batches.create({
      input_file_id: file.id,
      endpoint: '/v1/embeddings',
      completion_window: '24h',
      metadata: { corpus: 'test' },
    });
    expectConforms('openai', 'Batch', created);
    expect(['validating', 'in_progress']).toContain(created.status);

    const batch = await ended(created.id);
    expectConforms('openai', 'Batch', batch);
    expect(batch.status).toBe('completed');
    expect(batch.request_counts).toEqual({ total: 40, completed: 40, failed: 0 });
    expect(batch.metadata).toEqual({ corpus: 'test' });
    expect(batch.error_file_id).toBeUndefined();
    expect(batch.completed_at).toBeGreaterThanOrEqual(batch.created_at);

    const output = await lines(batch.output_file_id!);
    expect(output.map((line) => line.custom_id)).toEqual(texts.map((_, i) => `req-${i}`));
    const online = await client().embeddings.create({ model: 'tiny-embedder', input: texts, encoding_format: 'float' });
    output.forEach((line, i) => {
      expect(line.id).toMatch(/^batch_req_/);
      expect(line.error).toBeNull();
      expect(line.response!.status_code).toBe(200);
      expectConforms('openai', 'CreateEmbeddingResponse', line.response!.body);
      const vector = (line.response!.body.data as { embedding: number[] }[])[0]!.embedding;
      vector.forEach((x, d) => expect(x).toBeCloseTo(online.data[i]!.embedding[d]!, 5));
    });

    // The batch's usage is its answers' input tokens, as each answer's usage counted them.
    const promptTokens = output.reduce(
      (sum, line) => sum + (line.response!.body.usage as { prompt_tokens: number }).prompt_tokens,
      0,
    );
    expect(promptTokens).toBeGreaterThan(40);
    expect(batch.usage).toEqual({
      input_tokens: promptTokens,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 0,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: promptTokens,
    });

    const outputFile = await client().files.retrieve(batch.output_file_id!);
    expectConforms('openai', 'OpenAIFile', outputFile);
    expect(outputFile.purpose).toBe('batch_output');
  });

  it("takes OpenAI's expiry policies: expires_after on a file, output_expires_after on a batch's files", async () => {
    const file = await client().files.create({
      file: await toFile(Buffer.from(jsonl([embedRequest('a', 'hello')])), 'requests.jsonl'),
      purpose: 'batch',
      expires_after: { anchor: 'created_at', seconds: 7200 },
    });
    expectConforms('openai', 'OpenAIFile', file);
    expect(file.expires_at).toBe(file.created_at + 7200);
    expect((await client().files.retrieve(file.id)).expires_at).toBe(file.expires_at);
    const batch = await ended(
      (
        await client().batches.create({
          input_file_id: file.id,
          endpoint: '/v1/embeddings',
          completion_window: '24h',
          output_expires_after: { anchor: 'created_at', seconds: 3600 },
        })
      ).id,
    );
    const output = await client().files.retrieve(batch.output_file_id!);
    expect(output.expires_at).toBe(output.created_at + 3600);
    await expect(
      client().files.create({
        file: await toFile(Buffer.from('{}\n'), 'x.jsonl'),
        purpose: 'batch',
        expires_after: { anchor: 'created_at', seconds: 60 },
      }),
    ).rejects.toMatchObject({ status: 400, param: 'expires_after.seconds' });
  });

  it('answers a request that fails when it runs in the error file, and completes the batch', async () => {
    const file = await upload([
      embedRequest('good', 'hello'),
      embedRequest('unknown-model', 'hello', { model: 'no-such-model' }),
      embedRequest('bad-body', 'hello', { dimensions: -3 }),
      { custom_id: 'no-input', method: 'POST', url: '/v1/embeddings', body: { model: 'tiny-embedder' } },
    ]);
    const created = await client().batches.create({
      input_file_id: file.id,
      endpoint: '/v1/embeddings',
      completion_window: '24h',
    });
    const batch = await ended(created.id);
    expect(batch.status).toBe('completed');
    expect(batch.request_counts).toEqual({ total: 4, completed: 1, failed: 3 });
    const [good] = await lines(batch.output_file_id!);
    expect(good!.custom_id).toBe('good');
    // Only the success counts: the failed requests' tokens are not the batch's usage.
    expect(batch.usage?.input_tokens).toBe((good!.response!.body.usage as { prompt_tokens: number }).prompt_tokens);
    const errors = await lines(batch.error_file_id!);
    expect(errors.map((line) => [line.custom_id, line.response!.status_code])).toEqual([
      ['unknown-model', 404],
      ['bad-body', 400],
      ['no-input', 400],
    ]);
    for (const line of errors) expectConforms('openai', 'ErrorResponse', line.response!.body);
    expect((errors[0]!.response!.body.error as { code: string }).code).toBe('model_not_found');
    expect((errors[2]!.response!.body.error as { param: string }).param).toBe('input');
  });

  it('runs rerank and classify batches through the same operations as their routes', async () => {
    const file = await upload([
      {
        custom_id: 'r1',
        method: 'POST',
        url: '/v1/rerank',
        body: { model: 'tiny-reranker', query: 'cats', documents: ['a cat', 'the sea'] },
      },
    ]);
    const batch = await ended(
      (
        await client().batches.create({
          input_file_id: file.id,
          endpoint: '/v1/rerank' as '/v1/embeddings',
          completion_window: '24h',
        })
      ).id,
    );
    expect(batch.status).toBe('completed');
    const [line] = await lines(batch.output_file_id!);
    const online = await server.app.inject({
      method: 'POST',
      url: '/v1/rerank',
      headers: { authorization: `Bearer ${testKey}` },
      payload: { model: 'tiny-reranker', query: 'cats', documents: ['a cat', 'the sea'] },
    });
    const body = line!.response!.body as {
      results: { index: number; relevance_score: number }[];
      usage: { prompt_tokens: number };
    };
    expect(body.results).toEqual(online.json<typeof body>().results);
    expect(body.usage.prompt_tokens).toBeGreaterThan(0);
    expect(batch.usage?.input_tokens).toBe(body.usage.prompt_tokens);

    // Classify: whatever the route answers this body (the tiny models have no classifier), the batch answers too.
    const request = { model: 'tiny-reranker', input: ['a cat', 'the sea'] };
    const classifyFile = await upload([{ custom_id: 'k1', method: 'POST', url: '/v1/classify', body: request }]);
    const classified = await ended(
      (
        await client().batches.create({
          input_file_id: classifyFile.id,
          endpoint: '/v1/classify' as '/v1/embeddings',
          completion_window: '24h',
        })
      ).id,
    );
    const viaRoute = await server.app.inject({
      method: 'POST',
      url: '/v1/classify',
      headers: { authorization: `Bearer ${testKey}` },
      payload: request,
    });
    const [answer] = await lines((classified.output_file_id ?? classified.error_file_id)!);
    expect(answer!.response!.status_code).toBe(viaRoute.statusCode);
    const { id: _id, created: _created, ...rest } = answer!.response!.body;
    const { id: _routeId, created: _routeCreated, ...routeRest } = viaRoute.json<Record<string, unknown>>();
    expect(rest).toEqual(routeRest);
  });

  it('fails a batch whose file has bad lines, naming each line, before anything runs', async () => {
    const file = await upload(
      [
        jsonl([embedRequest('a', 'x')]).trim(),
        '{not json',
        JSON.stringify(embedRequest('a', 'y')),
        JSON.stringify({ ...embedRequest('b', 'z'), url: '/v1/rerank' }),
        JSON.stringify({ ...embedRequest('c', 'z'), method: 'GET' }),
      ].join('\n'),
    );
    const batch = await ended(
      (await client().batches.create({ input_file_id: file.id, endpoint: '/v1/embeddings', completion_window: '24h' }))
        .id,
    );
    expectConforms('openai', 'Batch', batch);
    expect(batch.status).toBe('failed');
    expect(batch.failed_at).toBeGreaterThan(0);
    expect(batch.errors!.data!.map((error) => [error.line, error.code])).toEqual([
      [2, 'invalid_json_line'],
      [3, 'duplicate_custom_id'],
      [4, 'mismatched_endpoint'],
      [5, 'invalid_method'],
    ]);
    expect(batch.output_file_id).toBeUndefined();
    expect(batch.request_counts?.completed ?? 0).toBe(0);
  });

  it('refuses an endpoint, a window or a file it does not serve with 400 and 404', async () => {
    const file = await upload([embedRequest('a', 'x')]);
    await expect(
      client().batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }),
    ).rejects.toMatchObject({ status: 400, param: 'endpoint' });
    await expect(
      client().batches.create({
        input_file_id: file.id,
        endpoint: '/v1/embeddings',
        completion_window: '1h' as '24h',
      }),
    ).rejects.toMatchObject({ status: 400, param: 'completion_window' });
    await expect(
      client().batches.create({
        input_file_id: 'file-000000000000000000000000',
        endpoint: '/v1/embeddings',
        completion_window: '24h',
      }),
    ).rejects.toMatchObject({ status: 404 });
    await expect(
      client().files.create({ file: await toFile(Buffer.from('{}\n'), 'x.jsonl'), purpose: 'fine-tune' }),
    ).rejects.toMatchObject({ status: 400, param: 'purpose' });
  });

  it("keeps each key's files and batches to itself: another key gets 404", async () => {
    const file = await upload([embedRequest('a', 'x')]);
    const batch = await client().batches.create({
      input_file_id: file.id,
      endpoint: '/v1/embeddings',
      completion_window: '24h',
    });
    const other = client(otherKey);
    await expect(other.files.retrieve(file.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.files.content(file.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.files.delete(file.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.batches.retrieve(batch.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.batches.cancel(batch.id)).rejects.toMatchObject({ status: 404 });
    await expect(
      other.batches.create({ input_file_id: file.id, endpoint: '/v1/embeddings', completion_window: '24h' }),
    ).rejects.toMatchObject({ status: 404 });
    expect((await other.files.list()).data.map((f) => f.id)).not.toContain(file.id);
    expect((await other.batches.list()).data.map((b) => b.id)).not.toContain(batch.id);
    await ended(batch.id);
  });

  it('lists files and batches newest first, a page at a time, as the SDK pages them', async () => {
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await upload([embedRequest(`p${i}`, 'x')])).id);
    const listed = [];
    for await (const file of client().files.list({ limit: 2, purpose: 'batch' })) listed.push(file.id);
    expect(listed.slice(0, 3)).toEqual([...ids].reverse());
    const get = async (path: string) =>
      (await fetch(`${baseURL}${path}`, { headers: { authorization: `Bearer ${testKey}` } })).json();
    const files = (await get('/files?limit=2')) as { data: unknown[]; has_more: boolean };
    expectConforms('openai', 'ListFilesResponse', files);
    expect(files.data).toHaveLength(2);
    expect(files.has_more).toBe(true);
    expectConforms('openai', 'ListBatchesResponse', await get('/batches?limit=1'));
  });

  it('cancels a batch: it ends cancelled with the answers it had', async () => {
    const many = Array.from({ length: 400 }, (_, i) => embedRequest(`c${i}`, `a longer text to embed, number ${i}`));
    const file = await upload(many);
    const created = await client().batches.create({
      input_file_id: file.id,
      endpoint: '/v1/embeddings',
      completion_window: '24h',
    });
    const cancelling = await client().batches.cancel(created.id);
    expect(['cancelling', 'cancelled']).toContain(cancelling.status);
    const batch = await ended(created.id);
    expect(batch.status).toBe('cancelled');
    expect(batch.cancelled_at).toBeGreaterThan(0);
    const answered = batch.output_file_id ? await lines(batch.output_file_id) : [];
    expect(answered.length).toBe(batch.request_counts!.completed);
    expect(answered.map((line) => line.custom_id)).toEqual(many.slice(0, answered.length).map((r) => r.custom_id));
    // A batch that has ended can not be cancelled again, and says so by staying as it is.
    expect((await client().batches.cancel(created.id)).status).toBe('cancelled');
  });

  it('deletes a file: it is gone', async () => {
    const file = await upload([embedRequest('d', 'x')]);
    const deleted = await client().files.delete(file.id);
    expectConforms('openai', 'DeleteFileResponse', deleted);
    expect(deleted).toEqual({ id: file.id, object: 'file', deleted: true });
    await expect(client().files.retrieve(file.id)).rejects.toMatchObject({ status: 404 });
  });
});
