/**
 * Answers that grow with the request are bounded before the work runs: token vectors (/embed_all)
 * and tokens (/tokenize) past ONNX_GATEWAY_MAX_RESPONSE_MB (1 MB here) are refused with 413
 * response_too_large, which names the figure and how to split the request. The SPLADE model's
 * sparse vectors are in e2e/sparse-colbert.test.ts, image edits in e2e/images-limits.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from '../../src/main.js';
import type { TeiError } from '../helpers/bodies.js';
import { auth, startServer } from '../helpers/server.js';

let server: Server;
beforeAll(async () => {
  server = await startServer({ maxResponseMb: 1 });
});
afterAll(() => server?.close());

const post = (url: string, payload: object) => server.app.inject({ method: 'POST', url, payload, headers: auth });
// The tiny embedder's window is 64 tokens and its width 32: each of these inputs gives 64 vectors.
const long = 'the quick brown fox jumps over the lazy dog '.repeat(20);

describe('TEI POST /embed_all', () => {
  it('answers a request whose token vectors fit', async () => {
    const res = await post('/embed_all', { inputs: [long, long] });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toHaveLength(2);
  });

  it('refuses one whose token vectors could pass the limit, before inference, saying how to split it', async () => {
    const res = await post('/embed_all', { inputs: Array.from({ length: 64 }, () => long) });
    expect(res.statusCode).toBe(413);
    const body = res.json<TeiError>();
    expect(body).toMatchObject({ code: 'response_too_large', error_type: 'Validation' });
    expect(body.error).toMatch(
      /up to 2\.0 MB of token vectors \(64 inputs, 4,096 tokens x 32 numbers\); this server sends at most 1\.0 MB/,
    );
    expect(body.error).toMatch(/Split the request: about 31 of these inputs fit in one \(3 or more requests\)/);
  });
});

describe('TEI POST /tokenize', () => {
  it('refuses a request whose tokens could pass the limit', async () => {
    const res = await post('/tokenize', { inputs: Array.from({ length: 8 }, () => long.repeat(10)) });
    expect(res.statusCode).toBe(413);
    expect(res.json<TeiError>().code).toBe('response_too_large');
    expect(res.json<TeiError>().error).toMatch(/MB of tokens \(8 inputs, [\d,]+ tokens\)/);
  });

  it('names an input too large on its own: splitting would not help', async () => {
    const res = await post('/tokenize', { inputs: ['short', 'a '.repeat(90_000)] });
    expect(res.statusCode).toBe(413);
    expect(res.json<TeiError>().error).toMatch(/inputs\[1\] alone could take [\d.]+ MB: shorten it/);
  });

  it('still answers what fits', async () => {
    const res = await post('/tokenize', { inputs: ['hello world', long] });
    expect(res.statusCode).toBe(200);
    expect(res.json<{ text: string }[][]>()[0]!.map((token) => token.text)).toEqual([
      '[CLS]',
      'hello',
      'world',
      '[SEP]',
    ]);
  });
});
