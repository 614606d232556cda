/**
 * long_inputs and late_chunking on the tiny models: a chunked input is the weighted average of its
 * windows embedded one by one (token ids in, TEI's unnormalised vectors out), the dimensions cut
 * comes after the average, and the requests the modes do not apply to get a 400 naming the field.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from '../../src/main.js';
import { auth, startServer } from '../helpers/server.js';

interface ErrorBody {
  error: { code: string; message: string; param?: string };
}

describe('inputs past the window (tiny models)', () => {
  let server: Server;
  let window: number;
  beforeAll(async () => {
    server = await startServer({ models: ['tiny-embedder', 'tiny-embedder-sentence'] });
    window = server.registry.list().find((m) => m.id === 'tiny-embedder')!.maxTokens;
  });
  afterAll(async () => {
    await server?.close();
  });

  const post = (url: string, payload: object) => server.app.inject({ method: 'POST', url, headers: auth, payload });

  it('averages the windows of a token-id input weighted by their tokens, then cuts', async () => {
    // Content ids past the window: 2.5 windows of the room left by [CLS] and [SEP].
    const room = window - 2;
    const ids = Array.from({ length: Math.floor(room * 2.5) }, (_, i) => 5 + ((i * 7) % 40));
    const spans = [ids.slice(0, room), ids.slice(room, 2 * room), ids.slice(2 * room)];
    const windows = await post('/embed', { inputs: spans, normalize: false });
    expect(windows.statusCode, windows.body).toBe(200);
    const rows = windows.json<number[][]>();
    const width = rows[0]!.length;
    const expected = Array.from(
      { length: width },
      (_, d) => spans.reduce((sum, span, w) => sum + span.length * rows[w]![d]!, 0) / ids.length,
    );
    const chunked = await post('/embed', { inputs: [ids], normalize: false, long_inputs: 'chunk' });
    expect(chunked.statusCode, chunked.body).toBe(200);
    const [vector] = chunked.json<number[][]>();
    vector!.forEach((value, d) => expect(value).toBeCloseTo(expected[d]!, 5));

    const cut = await post('/v1/embeddings', {
      model: 'tiny-embedder',
      input: [ids],
      long_inputs: 'chunk',
      dimensions: 8,
    });
    const norm = Math.hypot(...expected.slice(0, 8));
    const { data, usage } = cut.json<{ data: { embedding: number[] }[]; usage: { prompt_tokens: number } }>();
    data[0]!.embedding.forEach((value, d) => expect(value).toBeCloseTo(expected[d]! / norm, 5));
    expect(usage.prompt_tokens).toBe(ids.length + 3 * 2);
  });

  it('refuses late chunking for a model whose graph pools, naming its output', async () => {
    const res = await post('/v1/embeddings', {
      model: 'tiny-embedder-sentence',
      input: ['one text', 'another text'],
      late_chunking: true,
    });
    expect(res.statusCode).toBe(400);
    expect(res.json<ErrorBody>().error).toMatchObject({ code: 'invalid_request', param: 'late_chunking' });
    expect(res.json<ErrorBody>().error.message).toContain('sentence_embedding');
  });

  it('refuses late chunking with long_inputs chunk, and modes it does not know', async () => {
    const late = await post('/v1/embeddings', {
      model: 'tiny-embedder',
      input: ['one text', 'another text'],
      late_chunking: true,
      long_inputs: 'chunk',
    });
    expect(late.statusCode).toBe(400);
    expect(late.json<ErrorBody>().error.param).toBe('long_inputs');
    const unknown = await post('/v1/embeddings', { model: 'tiny-embedder', input: 'a', long_inputs: 'split' });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json<ErrorBody>().error.code).toBe('invalid_request');
  });
});
