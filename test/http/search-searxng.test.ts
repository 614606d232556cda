/**
 * The searxng provider against a stand-in SearXNG on loopback: the query it sends, how results
 * are mapped and reranked, and every failure ending the task as failed with a clear error.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from '../../src/main.js';
import { startStandInSearxng, type StandInSearxng } from '../fixtures/stand-in-searxng.js';
import type { SearchTask } from '../helpers/bodies.js';
import { auth, startServer } from '../helpers/server.js';

let searxng: StandInSearxng;
let server: Server;
let dataDir: string;
beforeAll(async () => {
  searxng = await startStandInSearxng();
  dataDir = await mkdtemp(join(tmpdir(), 'onnx-gateway-searxng-'));
  server = await startServer({ dataDir, searchProvider: 'searxng', searxngUrl: searxng.url, searxngTimeout: 300 });
});
afterAll(async () => {
  await server?.close();
  await searxng?.close();
  await rm(dataDir, { recursive: true, force: true });
});

async function run(body: Record<string, unknown>) {
  const created = await server.app.inject({
    method: 'POST',
    url: '/v1/web-search/search',
    payload: body,
    headers: auth,
  });
  expect(created.statusCode).toBe(200);
  const done = await server.app.inject({
    method: 'GET',
    url: `/v1/web-search/search/${created.json<SearchTask>().id}?wait=30`,
    headers: auth,
  });
  expect(done.statusCode).toBe(200);
  return done.json<SearchTask>();
}

describe('searxng provider', () => {
  it('sends the query in SearXNG terms and maps, dedupes and reranks the results', async () => {
    searxng.behaviour = 'ok';
    searxng.requests.length = 0;
    const task = await run({ query: 'cats', area: 'en-US', freshness: 'noLimit', page: 2 });
    expect(task).toMatchObject({ state: 'succeeded', provider: 'searxng' });
    const sent = searxng.requests[0]!;
    expect(Object.fromEntries(sent)).toEqual({ q: 'cats', format: 'json', pageno: '2', language: 'en-US' });
    const urls = task.results!.map((r) => r.url).sort();
    expect(urls).toEqual([
      'https://en.wikipedia.org/wiki/Cat',
      'https://example.org/archive/cats-1998',
      'https://example.org/news/cats-sleep',
    ]);
    const wiki = task.results!.find((r) => r.url === 'https://en.wikipedia.org/wiki/Cat')!;
    expect(wiki).toMatchObject({ title: 'Cat - Wikipedia', source: 'wikipedia' });
    expect(wiki.snippet).toContain('Felis catus');
    expect(wiki.published_date).toBeUndefined();
    const news = task.results!.find((r) => r.url.endsWith('cats-sleep'))!;
    expect(news.published_date).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    // Reranked by the served cross-encoder: scores are sigmoids, in order.
    const scores = task.results!.map((r) => r.score);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
    for (const score of scores) {
      expect(score).toBeGreaterThan(0);
      expect(score).toBeLessThan(1);
    }
  });

  it('maps freshness to time_range, drops dated results that are too old, and honours count', async () => {
    searxng.requests.length = 0;
    const task = await run({ query: 'cats', freshness: 'oneMonth', count: 1, area: 'global' });
    expect(searxng.requests[0]!.get('time_range')).toBe('month');
    expect(searxng.requests[0]!.get('language')).toBe('all');
    expect(task.results).toHaveLength(1);
    const all = await run({ query: 'cats', freshness: 'month' });
    expect(all.results!.map((r) => r.url)).not.toContain('https://example.org/archive/cats-1998');
  });

  it('asks the images category for images, and renders markdown', async () => {
    searxng.requests.length = 0;
    const task = await run({ query: 'cats', includeImages: true, format: 'markdown' });
    expect(searxng.requests.map((r) => r.get('categories'))).toContain('images');
    expect(task.images).toEqual([
      {
        url: 'https://images.example.org/cat-full.jpg',
        thumbnail_url: 'https://images.example.org/cat-thumb.jpg',
        title: 'A cat on a sofa',
        page_url: 'https://example.org/gallery/cat',
      },
    ]);
    expect(task.markdown).toContain('[Cat - Wikipedia](https://en.wikipedia.org/wiki/Cat)');
    expect(task.markdown).toContain('![A cat on a sofa](https://images.example.org/cat-full.jpg)');
  });

  it.each([
    ['json-disabled', 'upstream_error', /403.*search\.formats/],
    ['rate-limited', 'upstream_error', /429/],
    ['server-error', 'upstream_error', /HTTP 500/],
    ['not-json', 'upstream_error', /did not answer JSON/],
    ['engines-failed', 'upstream_error', /google: timeout, duckduckgo: CAPTCHA/],
    ['hang', 'timeout', /did not answer within 300 ms/],
  ] as const)('fails the task when SearXNG is %s', async (behaviour, code, message) => {
    searxng.behaviour = behaviour;
    try {
      const task = await run({ query: 'cats' });
      expect(task.state).toBe('failed');
      expect(task.results).toBeUndefined();
      expect(task.error!.code).toBe(code);
      expect(task.error!.message).toMatch(message);
    } finally {
      searxng.behaviour = 'ok';
    }
  });

  it('fails the task when SearXNG can not be reached, naming it without its credentials', async () => {
    const gone = await startStandInSearxng();
    await gone.close();
    const dir = await mkdtemp(join(tmpdir(), 'onnx-gateway-searxng-'));
    const withCredentials = gone.url.replace('://', '://reader:s3cret@');
    const unreachable = await startServer({ dataDir: dir, searchProvider: 'searxng', searxngUrl: withCredentials });
    try {
      const created = await unreachable.app.inject({
        method: 'POST',
        url: '/v1/web-search/search',
        payload: { query: 'cats' },
        headers: auth,
      });
      const task = (
        await unreachable.app.inject({
          method: 'GET',
          url: `/v1/web-search/search/${created.json<SearchTask>().id}?wait=30`,
          headers: auth,
        })
      ).json<SearchTask>();
      expect(task).toMatchObject({ state: 'failed', error: { code: 'upstream_error' } });
      expect(task.error!.message).toMatch(/could not be reached: ECONNREFUSED/);
      expect(task.error!.message).not.toMatch(/reader|s3cret/);
      expect(task.error!.message).toContain('***:***@127.0.0.1');
    } finally {
      await unreachable.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('cancels a task waiting on SearXNG', async () => {
    searxng.behaviour = 'hang';
    const dir = await mkdtemp(join(tmpdir(), 'onnx-gateway-searxng-'));
    const slow = await startServer({
      dataDir: dir,
      searchProvider: 'searxng',
      searxngUrl: searxng.url,
      searxngTimeout: 60_000,
    });
    try {
      const created = (
        await slow.app.inject({
          method: 'POST',
          url: '/v1/web-search/search',
          payload: { query: 'cats' },
          headers: auth,
        })
      ).json<SearchTask>();
      // Long-poll briefly until SearXNG has the request, so the task is running.
      while (
        searxng.requests.at(-1)?.get('q') !== 'cats' ||
        (
          await slow.app.inject({ method: 'GET', url: `/v1/web-search/search/${created.id}`, headers: auth })
        ).json<SearchTask>().state !== 'running'
      ) {
        await new Promise((resolve) => setImmediate(resolve));
      }
      const cancelled = await slow.app.inject({
        method: 'DELETE',
        url: `/v1/web-search/search/${created.id}`,
        headers: auth,
      });
      expect(cancelled.json()).toMatchObject({ state: 'cancelled', error: { code: 'cancelled' } });
      const later = await slow.app.inject({
        method: 'GET',
        url: `/v1/web-search/search/${created.id}?wait=1`,
        headers: auth,
      });
      expect(later.json<SearchTask>().state).toBe('cancelled');

      // A long-poll on a task that is still running is answered when the server closes.
      const stuck = (
        await slow.app.inject({
          method: 'POST',
          url: '/v1/web-search/search',
          payload: { query: 'stuck' },
          headers: auth,
        })
      ).json<SearchTask>();
      const poll = slow.app.inject({ method: 'GET', url: `/v1/web-search/search/${stuck.id}?wait=60`, headers: auth });
      while (searxng.requests.at(-1)?.get('q') !== 'stuck') await new Promise((resolve) => setImmediate(resolve));
      await slow.close();
      const answered = await poll;
      expect(answered.statusCode).toBe(200);
      expect(answered.json<SearchTask>().state).toBe('running');
    } finally {
      searxng.behaviour = 'ok';
      await slow.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
