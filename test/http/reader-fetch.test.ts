/**
 * The web reader's fetcher: the SSRF guard (after DNS resolution and on every redirect) and the
 * size, time and redirect limits, against pages served on loopback.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isPublicAddress } from '../../src/search/reader/address-policy.js';
import { fetchPage, type FetchLimits } from '../../src/search/reader/fetch-page.js';

let server: Server;
let port: number;
const open = new Set<import('node:net').Socket>();
beforeAll(async () => {
  server = createServer((request, response) => {
    const path = request.url ?? '/';
    if (path === '/page') {
      response
        .writeHead(200, { 'content-type': 'text/html; charset=iso-8859-1' })
        .end(Buffer.from('<html><title>Caf\xe9</title><body>cr\xe8me br\xfbl\xe9e</body></html>', 'latin1'));
    } else if (path === '/gzip') {
      response
        .writeHead(200, { 'content-type': 'text/html', 'content-encoding': 'gzip' })
        .end(gzipSync('<p>compressed</p>'));
    } else if (path === '/bomb') {
      response
        .writeHead(200, { 'content-type': 'text/html', 'content-encoding': 'gzip' })
        .end(gzipSync(Buffer.alloc(4_000_000, 32)));
    } else if (path === '/big') {
      response.writeHead(200, { 'content-type': 'text/html' }).end('x'.repeat(2_000_000));
    } else if (path === '/redirect') {
      response.writeHead(302, { location: '/page' }).end();
    } else if (path === '/loop') {
      response.writeHead(302, { location: '/loop' }).end();
    } else if (path === '/to-other-loopback') {
      response.writeHead(301, { location: `http://127.0.0.2:${port}/page` }).end();
    } else if (path === '/missing') {
      response.writeHead(404).end('not here');
    } else if (path === '/hang') {
      // never answers
    } else response.writeHead(500).end();
  });
  server.on('connection', (socket) => {
    open.add(socket);
    socket.on('close', () => open.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  for (const socket of open) socket.destroy();
  await new Promise((resolve) => server.close(resolve));
});

const relaxed: FetchLimits = { maxBytes: 1_000_000, timeoutMs: 10_000, maxRedirects: 3, allowPrivate: true };
const guarded: FetchLimits = { ...relaxed, allowPrivate: false };
const refusedMessage =
  'The reader does not fetch this url: its host does not resolve to an address the reader may fetch.';
const at = (path: string) => `http://127.0.0.1:${port}${path}`;

describe('address policy', () => {
  it.each([
    ['127.0.0.1', false],
    ['10.1.2.3', false],
    ['172.16.0.1', false],
    ['172.31.255.255', false],
    ['192.168.1.1', false],
    ['169.254.169.254', false],
    ['100.64.0.1', false],
    ['0.0.0.0', false],
    ['224.0.0.1', false],
    ['255.255.255.255', false],
    ['::1', false],
    ['::', false],
    ['fe80::1', false],
    ['fd12:3456::1', false],
    ['::ffff:127.0.0.1', false],
    ['::ffff:7f00:1', false],
    ['::ffff:a9fe:a9fe', false],
    ['localhost', false],
    ['8.8.8.8', true],
    ['172.32.0.1', true],
    ['93.184.216.34', true],
    ['2606:4700:4700::1111', true],
    ['::ffff:8.8.8.8', true],
  ])('%s is public: %s', (address, expected) => {
    expect(isPublicAddress(address)).toBe(expected);
  });
});

describe('fetchPage with the guard relaxed', () => {
  it('decodes the declared charset', async () => {
    const page = await fetchPage(at('/page'), relaxed);
    expect(page).toMatchObject({ status: 200, mediaType: 'text/html', url: at('/page') });
    expect(page.body).toContain('<title>Café</title>');
    expect(page.body).toContain('crème brûlée');
  });
  it('follows redirects and reports the final URL', async () => {
    expect((await fetchPage(at('/redirect'), relaxed)).url).toBe(at('/page'));
  });
  it('decompresses gzip', async () => {
    expect((await fetchPage(at('/gzip'), relaxed)).body).toBe('<p>compressed</p>');
  });
  it.each([
    ['/big', 'upstream_error', /1000000 bytes/],
    ['/bomb', 'upstream_error', /larger than 1000000 bytes/],
    ['/loop', 'upstream_error', /redirected more than 3 times/],
    ['/missing', 'upstream_error', /HTTP 404/],
  ])('refuses %s', async (path, code, message) => {
    const error = await fetchPage(at(path), relaxed).catch((e: unknown) => e);
    expect(error).toMatchObject({ code });
    expect((error as Error).message).toMatch(message);
  });
  it('gives up after the time limit', async () => {
    await expect(fetchPage(at('/hang'), { ...relaxed, timeoutMs: 200 })).rejects.toMatchObject({ code: 'timeout' });
  });
  it('refuses other schemes and credentials', async () => {
    await expect(fetchPage('file:///etc/passwd', relaxed)).rejects.toMatchObject({
      code: 'invalid_request',
      param: 'url',
    });
    await expect(fetchPage(`http://user:pw@127.0.0.1:${port}/page`, relaxed)).rejects.toMatchObject({
      code: 'invalid_request',
    });
    await expect(fetchPage('not a url', relaxed)).rejects.toMatchObject({ code: 'invalid_request' });
  });
});

describe('fetchPage with the guard on', () => {
  it('refuses a loopback address literal', async () => {
    const error = await fetchPage(at('/page'), guarded).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'invalid_request', param: 'url' });
    expect((error as Error).message).toBe(refusedMessage);
    expect(((error as Error).cause as Error).message).toMatch(/127\.0\.0\.1/);
  });
  it('refuses a name that resolves to loopback (checked after DNS resolution)', async () => {
    const error = await fetchPage(`http://localhost:${port}/page`, guarded).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'invalid_request', param: 'url' });
    // The answer names neither the name nor the address; the cause (logged) does.
    expect((error as Error).message).toBe(refusedMessage);
    expect(((error as Error).cause as Error).message).toMatch(/localhost.*resolves to (127\.0\.0\.1|::1)/);
  });
  it('checks every redirect hop', async () => {
    // 127.0.0.1 stands for a public server here; its redirect to another address is refused.
    const onlyFirst = { ...guarded, allowAddress: (address: string) => address === '127.0.0.1' };
    expect((await fetchPage(at('/page'), onlyFirst)).status).toBe(200);
    const error = await fetchPage(at('/to-other-loopback'), onlyFirst).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'invalid_request' });
    expect((error as Error).message).toMatch(/^The page redirected to a URL the reader does not fetch/);
    expect((error as Error).message).not.toMatch(/127\.0\.0\.2/);
  });
});
