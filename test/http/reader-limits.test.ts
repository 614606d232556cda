/**
 * One page must not stall the server: the reader converts pages in worker threads under a time
 * limit, with whitespace runs cut before any regex sees them. Pages are served on loopback, gzipped
 * as an attacker would serve them (a few kB on the wire, megabytes once decompressed).
 */
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeApp, type FakeApp } from '../helpers/fake-core.js';
import { auth } from '../helpers/server.js';

const article = (inner: string) =>
  `<!doctype html><html><head><title>Spaces</title></head><body><article><h1>Spaces</h1>
<p>A paragraph long enough for Readability to take this for the article it is, with a few words more to be sure of it.</p>
${inner}</article></body></html>`;

const pages: Record<string, Buffer> = {
  // The page: 4,000,000 spaces in a <pre>, about 4 kB gzipped.
  '/spaces': gzipSync(article(`<pre>a${' '.repeat(4_000_000)}b</pre>`)),
  // Many elements: seconds of parsing and Readability, even with no long runs.
  '/crowded': gzipSync(article('<div><p>a b c</p></div>'.repeat(100_000))),
  '/small': gzipSync(article('<p>Small and quick.</p>')),
};

let pageServer: HttpServer;
let base: string;
let server: FakeApp;
let origin: string;
const parseTimeoutMs = 1_000;

beforeAll(async () => {
  pageServer = createServer((request, response) => {
    const body = pages[request.url ?? ''];
    if (!body) return void response.writeHead(404).end();
    response.writeHead(200, { 'content-type': 'text/html', 'content-encoding': 'gzip' }).end(body);
  });
  await new Promise<void>((resolve) => pageServer.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(pageServer.address() as AddressInfo).port}`;
  server = await startFakeApp({
    readerAllowPrivate: true,
    readerMaxBytes: 5_000_000,
    readerParseTimeout: parseTimeoutMs,
  });
  origin = await server.app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(async () => {
  await server?.close();
  await new Promise<void>((resolve) => pageServer.close(() => resolve()));
});

interface Answer {
  content: string;
  error: { code: string; message: string };
}

const read = (path: string, format = 'markdown') =>
  fetch(`${origin}/v1/web-reader/read`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ url: `${base}${path}`, format }),
  });

/** Polls /health every 100 ms until `done` settles; the longest answer, in ms. */
async function longestHealthPoll(done: Promise<unknown>): Promise<{ longest: number; polls: number }> {
  let finished = false;
  void done.finally(() => (finished = true));
  let longest = 0;
  let polls = 0;
  while (!finished) {
    const started = performance.now();
    expect((await fetch(`${origin}/health`)).status).toBe(200);
    longest = Math.max(longest, performance.now() - started);
    polls++;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { longest, polls };
}

describe('the reader never blocks the server', () => {
  it.each(['markdown', 'text'])(
    'reads 4,000,000 spaces in a <pre> (%s) while /health answers within 250 ms',
    async (format) => {
      // A warm thread, so that the time measured is the page's.
      expect((await read('/small')).status).toBe(200);
      const reading = read('/spaces', format).then(async (res) => ({
        status: res.status,
        body: (await res.json()) as Answer,
      }));
      const { longest } = await longestHealthPoll(reading);
      const result = await reading;
      // 200, not page_too_complex: converted within the parse time limit.
      expect(longest).toBeLessThan(250);
      expect(result.status).toBe(200);
      expect(result.body.content).toMatch(/a {1,64}b/);
    },
  );

  it('answers a page over the parse time limit with page_too_complex, and reads the next page', async () => {
    const reading = read('/crowded').then(async (res) => ({ status: res.status, body: (await res.json()) as Answer }));
    const { longest } = await longestHealthPoll(reading);
    const result = await reading;
    expect(longest).toBeLessThan(250);
    expect(result.status).toBe(422);
    expect(result.body.error.code).toBe('page_too_complex');
    expect(result.body.error.message).toMatch(/longer than 1000 ms/);
    const next = await read('/small');
    expect(next.status).toBe(200);
    expect(((await next.json()) as Answer).content).toContain('Small and quick.');
  });
});
