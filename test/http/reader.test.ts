/**
 * POST /v1/web-reader/read against pages served on loopback: with private addresses allowed for
 * the page server, and with the guard on. The reader runs no model: the app is over a fake core.
 */
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ErrorBody } from '../helpers/bodies.js';
import { startFakeApp, type FakeApp } from '../helpers/fake-core.js';
import { auth } from '../helpers/server.js';

/** What POST /v1/web-reader/read answers. */
interface ReadPage {
  url: string;
  title: string;
  byline: string | null;
  excerpt: string | null;
  format: string;
  content: string;
  links: { text: string; url: string }[];
}

const article = `<!doctype html><html><head><title>Otters at play</title></head><body>
<nav><a href="/home">Home</a> <a href="/about">About</a></nav>
<article><h1>Otters at play</h1><p class="byline">By Ada River</p>
<p>Sea otters spend much of their day grooming and playing in kelp forests along the coast. They use stones as tools to open shellfish, a behaviour studied for decades by marine biologists.</p>
<h2>Tools</h2><ul><li>Stones for opening clams</li><li>Kelp to anchor while sleeping</li></ul>
<p>Read the <a href="/papers/otters.pdf">original study</a> or the <a href="https://example.org/kelp">kelp survey</a>. Otters hold hands while they sleep so they do not drift apart, which is one of the reasons people find them so endearing.</p></article>
<footer>© otter facts</footer></body></html>`;

let pages: HttpServer;
let base: string;
beforeAll(async () => {
  pages = createServer((request, response) => {
    switch (request.url) {
      case '/article':
        return void response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(article);
      case '/plain':
        return void response.writeHead(200, { 'content-type': 'text/plain' }).end('just text\nsecond line');
      case '/image':
        return void response.writeHead(200, { 'content-type': 'image/png' }).end(Buffer.alloc(64));
      case '/moved':
        return void response.writeHead(302, { location: '/article' }).end();
      case '/huge':
        return void response.writeHead(200, { 'content-type': 'text/html' }).end(`<p>${'x'.repeat(3_000_000)}</p>`);
      case '/error':
        return void response.writeHead(500).end('boom');
      default:
        return void response.writeHead(404).end('missing');
    }
  });
  await new Promise<void>((resolve) => pages.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(pages.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => pages.close(() => resolve())));

const read = (server: FakeApp, body: unknown) =>
  server.app.inject({ method: 'POST', url: '/v1/web-reader/read', headers: auth, payload: body as object });

describe('web reader, private addresses allowed', () => {
  let server: FakeApp;
  beforeAll(async () => {
    server = await startFakeApp({ readerAllowPrivate: true, readerMaxBytes: 1_000_000 });
  });
  afterAll(() => server?.close());

  it('returns the article as markdown with its title and absolute links', async () => {
    const res = await read(server, { url: `${base}/article` });
    expect(res.statusCode).toBe(200);
    const body = res.json<ReadPage>();
    expect(body.title).toBe('Otters at play');
    expect(body.format).toBe('markdown');
    expect(body.content).toMatch(/^## Tools$/m);
    expect(body.content).toMatch(/^-\s+Stones for opening clams$/m);
    expect(body.content).toContain(`[original study](${base}/papers/otters.pdf)`);
    expect(body.content).not.toContain('© otter facts');
    expect(body.links).toContainEqual({ text: 'kelp survey', url: 'https://example.org/kelp' });
  });

  it('returns plain text, follows redirects, and passes text/plain through', async () => {
    const text = (await read(server, { url: `${base}/moved`, format: 'text' })).json<ReadPage>();
    expect(text.url).toBe(`${base}/article`);
    expect(text.content).toContain('Sea otters spend much of their day');
    expect(text.content).not.toContain('<p>');
    const plain = (await read(server, { url: `${base}/plain` })).json<ReadPage>();
    expect(plain.content).toBe('just text\nsecond line');
  });

  // x-should-retry: false where a retry would fail the same way (the page will not shrink or appear).
  it.each([
    ['an image', '/image', 415, 'unsupported_media_type', undefined],
    ['a page over the size limit', '/huge', 502, 'upstream_error', 'false'],
    ['a 404', '/nothing', 502, 'upstream_error', 'false'],
    ['a 500', '/error', 502, 'upstream_error', undefined],
  ])('answers %s with a clear error', async (_name, path, status, code, shouldRetry) => {
    const res = await read(server, { url: `${base}${path}` });
    expect(res.statusCode).toBe(status);
    expect(res.json<ErrorBody>().error.code).toBe(code);
    expect(res.headers['x-should-retry']).toBe(shouldRetry);
  });
});

describe('web reader, guard on', () => {
  let server: FakeApp;
  beforeAll(async () => {
    server = await startFakeApp();
  });
  afterAll(() => server?.close());

  it('refuses a loopback page', async () => {
    const res = await read(server, { url: `${base}/article` });
    expect(res.statusCode).toBe(400);
    expect(res.json<ErrorBody>().error).toMatchObject({ code: 'invalid_request', param: 'url' });
    // One message for every refused or unresolvable host: nothing about the network behind it.
    expect(res.json<ErrorBody>().error.message).toBe(
      'The reader does not fetch this url: its host does not resolve to an address the reader may fetch.',
    );
  });

  it.each([['file:///etc/passwd'], ['javascript:alert(1)'], ['ftp://example.org/x'], ['not a url'], ['']])(
    'refuses %j with 400',
    async (url) => {
      const res = await read(server, { url });
      expect(res.statusCode).toBe(400);
      expect(res.json<ErrorBody>().error.param).toBe('url');
    },
  );

  it('refuses a missing url and a wrong format', async () => {
    expect((await read(server, {})).statusCode).toBe(400);
    expect((await read(server, { url: 'https://example.org', format: 'pdf' })).json<ErrorBody>().error.param).toBe(
      'format',
    );
  });
});
