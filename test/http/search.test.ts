import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from '../../src/main.js';
import type { ErrorBody, SearchTask } from '../helpers/bodies.js';
import { auth, startServer, testKey } from '../helpers/server.js';

interface IndexStats {
  documents: number;
}
interface Ingested {
  added: number;
  updated: number;
  ids: string[];
}

const otherKey = 'other-key-9876543210';
const other = { authorization: `Bearer ${otherKey}` };
const day = 86_400_000;

let server: Server;
let dataDir: string;
beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'onnx-gateway-search-'));
  // testKey may write the index; otherKey only search it.
  server = await startServer({ dataDir, apiKeys: [testKey, otherKey], indexWriteKeys: [testKey] });
  const now = Date.now();
  const res = await post('/v1/web-search/index/documents', {
    documents: [
      {
        id: 'cats',
        title: 'Domestic cats',
        text: 'Cats are small carnivorous mammals kept as pets. A cat sleeps most of the day.',
        language: 'en',
        published_date: new Date(now - 2 * day).toISOString(),
        images: ['https://example.org/cat.jpg'],
      },
      {
        id: 'dogs',
        title: 'Dogs',
        text: 'Dogs are loyal animals, descended from wolves, and kept as pets for thousands of years.',
        language: 'en-GB',
        published_date: new Date(now - 400 * day).toISOString(),
      },
      {
        id: 'katzen',
        title: 'Hauskatzen',
        text: 'Die Hauskatze ist ein kleines Raubtier. Katzen schlafen viel, cats in German.',
        language: 'de',
      },
      {
        id: 'trucks',
        title: 'Trucks',
        text: 'A truck is a motor vehicle designed to transport cargo.',
        url: 'https://example.org/trucks',
      },
    ],
  });
  expect(res.statusCode).toBe(200);
});
afterAll(async () => {
  await server?.close();
  await rm(dataDir, { recursive: true, force: true });
});

function post(url: string, body: unknown, headers: Record<string, string> = auth) {
  return server.app.inject({ method: 'POST', url, payload: body as object, headers });
}
function get(url: string, headers: Record<string, string> = auth) {
  return server.app.inject({ method: 'GET', url, headers });
}

/** Creates a task and long-polls it to its end. */
async function search(body: Record<string, unknown>, headers: Record<string, string> = auth) {
  const created = await post('/v1/web-search/search', body, headers);
  expect(created.statusCode).toBe(200);
  const res = await get(`/v1/web-search/search/${created.json<SearchTask>().id}?wait=30`, headers);
  expect(res.statusCode).toBe(200);
  return res.json<SearchTask>();
}

describe('POST /v1/web-search/search', () => {
  it('answers exactly the task record, pending', async () => {
    const res = await post('/v1/web-search/search', { query: 'cats' });
    expect(res.statusCode).toBe(200);
    const record = res.json<SearchTask>();
    expect(Object.keys(record).sort()).toEqual([
      'created_at',
      'estimate_wait_seconds',
      'id',
      'liked',
      'prompt',
      'state',
      'video',
    ]);
    expect(record.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(record).toMatchObject({ prompt: 'cats', state: 'pending', video: null, liked: null });
    expect(record.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(Number.isInteger(record.estimate_wait_seconds)).toBe(true);
    expect(record.estimate_wait_seconds).toBeGreaterThan(0);
  });

  it.each([
    [{}, 'query'],
    [{ query: '   ' }, 'query'],
    [{ query: 'x', freshness: 'fortnight' }, 'freshness'],
    [{ query: 'x', area: 'not a place' }, 'area'],
    [{ query: 'x', count: 0 }, 'count'],
    [{ query: 'x', count: 51 }, 'count'],
    [{ query: 'x', page: 0 }, 'page'],
    [{ query: 'x', format: 'xml' }, 'format'],
    [{ query: 'x', includeImages: 'yes' }, 'includeImages'],
    [{ query: 42 }, 'query'],
  ])('refuses %j with 400 naming %s', async (body, param) => {
    const res = await post('/v1/web-search/search', body);
    expect(res.statusCode).toBe(400);
    expect(res.json<ErrorBody>().error).toMatchObject({ code: 'invalid_request', param });
  });
});

describe('GET /v1/web-search/search/{id}', () => {
  it('long-polls to the results of the local index, best first', async () => {
    const task = await search({ query: 'cats pets' });
    expect(task).toMatchObject({
      state: 'succeeded',
      prompt: 'cats pets',
      provider: 'local',
      video: null,
      liked: null,
      estimate_wait_seconds: 0,
    });
    expect(task.started_at).toMatch(/Z$/);
    expect(task.finished_at).toMatch(/Z$/);
    expect(task.error).toBeUndefined();
    const urls = task.results!.map((r) => r.url);
    // Dense retrieval ranks every document (the test models carry no meaning), so only the
    // presence of the lexical match is certain, not the order.
    expect(urls).toContain('urn:onnx-gateway:document:cats');
    const cats = task.results!.find((r) => r.url.endsWith(':cats'))!;
    expect(cats).toMatchObject({ title: 'Domestic cats', source: 'api' });
    expect(cats.snippet).toContain('Cats are small');
    expect(cats.content).toContain('sleeps most of the day');
    expect(cats.published_date).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    expect(typeof cats.score).toBe('number');
    const scores = task.results!.map((r) => r.score);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
    expect(task.images).toBeUndefined();
  });

  it('filters on freshness (tolerant spellings; undated documents are left out)', async () => {
    const week = await search({ query: 'cats dogs pets', freshness: 'past_week' });
    expect(week.results!.map((r) => r.url)).toEqual(['urn:onnx-gateway:document:cats']);
    const all = await search({ query: 'cats dogs pets', freshness: 'noLimit' });
    expect(all.results!.length).toBeGreaterThanOrEqual(2);
  });

  it('filters on area: the language, and documents of unknown language', async () => {
    const german = await search({ query: 'cats katzen trucks', area: 'de-DE' });
    const urls = german.results!.map((r) => r.url);
    expect(urls).toContain('urn:onnx-gateway:document:katzen');
    expect(urls).toContain('https://example.org/trucks');
    expect(urls).not.toContain('urn:onnx-gateway:document:cats');
    const worldwide = await search({ query: 'cats katzen', area: 'global' });
    expect(worldwide.results!.map((r) => r.url)).toContain('urn:onnx-gateway:document:cats');
  });

  it('pages with page and count', async () => {
    const first = await search({ query: 'cats dogs trucks katzen', count: 2 });
    const second = await search({ query: 'cats dogs trucks katzen', count: 2, page: 2 });
    expect(first.results).toHaveLength(2);
    expect(second.results!.length).toBeGreaterThan(0);
    const firstUrls = first.results!.map((r) => r.url);
    for (const r of second.results!) expect(firstUrls).not.toContain(r.url);
  });

  it('renders markdown and images on request', async () => {
    const task = await search({ query: 'cats', format: 'markdown', includeImages: true });
    expect(task.markdown).toContain('# Search results: cats');
    expect(task.markdown).toMatch(/## 1\. \[.+\]\(.+\)/);
    expect(task.images).toEqual([{ url: 'https://example.org/cat.jpg', page_url: 'urn:onnx-gateway:document:cats' }]);
  });

  it('answers 404 for an unknown id and for a task of another key', async () => {
    const unknown = await get('/v1/web-search/search/00000000-0000-4000-8000-000000000000');
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json<ErrorBody>().error.code).toBe('not_found');
    const created = (await post('/v1/web-search/search', { query: 'cats' })).json<SearchTask>();
    const stranger = await get(`/v1/web-search/search/${created.id}?wait=5`, other);
    expect(stranger.statusCode).toBe(404);
    const owner = await get(`/v1/web-search/search/${created.id}?wait=5`);
    expect(owner.statusCode).toBe(200);
    const cancel = await server.app.inject({
      method: 'DELETE',
      url: `/v1/web-search/search/${created.id}`,
      headers: other,
    });
    expect(cancel.statusCode).toBe(404);
  });

  it('refuses a wait above 60 seconds and a wait that is not a number', async () => {
    const created = (await post('/v1/web-search/search', { query: 'cats' })).json<SearchTask>();
    expect((await get(`/v1/web-search/search/${created.id}?wait=61`)).statusCode).toBe(400);
    const bad = await get(`/v1/web-search/search/${created.id}?wait=soon`);
    expect(bad.statusCode).toBe(400);
    expect(bad.json<ErrorBody>().error.param).toBe('wait');
  });
});

describe('the local index over HTTP', () => {
  it('describes itself', async () => {
    const res = await get('/v1/web-search/index');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      documents: 4,
      vectors: { 'tiny-embedder': 4 },
      embedder: 'tiny-embedder',
      reranker: 'tiny-reranker',
    });
  });

  it('replaces a document with the same id, and removes one by key', async () => {
    const res = await post('/v1/web-search/index/documents', {
      documents: [
        { id: 'trucks', title: 'Lorries', text: 'A lorry is the British word for a truck.' },
        { text: 'no id here' },
      ],
    });
    expect(res.json()).toMatchObject({ added: 1, updated: 1, embedded: 2 });
    const [, hashKey] = res.json<Ingested>().ids;
    expect(hashKey).toMatch(/^[0-9a-f]{32}$/);
    const removed = await server.app.inject({
      method: 'DELETE',
      url: `/v1/web-search/index/documents/${hashKey}`,
      headers: auth,
    });
    expect(removed.json()).toEqual({ id: hashKey, deleted: true });
    const again = await server.app.inject({
      method: 'DELETE',
      url: `/v1/web-search/index/documents/${hashKey}`,
      headers: auth,
    });
    expect(again.statusCode).toBe(404);
    const task = await search({ query: 'lorry' });
    const lorry = task.results!.find((r) => r.url === 'urn:onnx-gateway:document:trucks');
    expect(lorry).toMatchObject({ title: 'Lorries', content: 'A lorry is the British word for a truck.' });
    expect(task.results!.map((r) => r.url)).not.toContain(`urn:onnx-gateway:document:${hashKey}`);
  });

  it.each([
    [{ documents: [] }, 'documents'],
    [{ documents: [{ text: '' }] }, 'documents[0].text'],
    [{ documents: [{ text: 'x', published_date: 'last tuesday' }] }, 'documents[0].published_date'],
    [{ documents: [{ title: 'no text' }] }, 'documents[0].text'],
  ])('refuses %j with 400 naming %s', async (body, param) => {
    const res = await post('/v1/web-search/index/documents', body);
    expect(res.statusCode).toBe(400);
    expect(res.json<ErrorBody>().error).toMatchObject({ code: 'invalid_request', param });
  });
});

describe('who may change the index', () => {
  it('every key searches it; a key without write rights gets 403 forbidden on every write, and nothing changes', async () => {
    const before = (await get('/v1/web-search/index', other)).json<IndexStats>().documents;
    const add = await post(
      '/v1/web-search/index/documents',
      { documents: [{ id: 'cats', text: 'overwritten' }] },
      other,
    );
    expect(add.statusCode).toBe(403);
    expect(add.json<ErrorBody>().error).toMatchObject({ code: 'forbidden' });
    expect(add.json<ErrorBody>().error.message).toMatch(/ONNX_GATEWAY_INDEX_WRITE_KEYS/);
    const remove = await server.app.inject({
      method: 'DELETE',
      url: '/v1/web-search/index/documents/cats',
      headers: other,
    });
    expect(remove.statusCode).toBe(403);
    expect((await get('/v1/web-search/index', other)).json<IndexStats>().documents).toBe(before);
    const task = await search({ query: 'cat sleeps' }, other);
    expect(task.results!.find((r) => r.url === 'urn:onnx-gateway:document:cats')?.content).toMatch(/^Cats are small/);
  });
});

describe('index limits', () => {
  const admin = 'admin-key-5555555555';
  let limited: Server;
  let limitedDir: string;
  beforeAll(async () => {
    limitedDir = await mkdtemp(join(tmpdir(), 'onnx-gateway-search-limits-'));
    limited = await startServer({
      dataDir: limitedDir,
      adminKeys: [admin],
      indexMaxDocuments: 3,
      indexMaxDocumentChars: 100,
    });
  });
  afterAll(async () => {
    await limited?.close();
    await rm(limitedDir, { recursive: true, force: true });
  });
  const write = (documents: object[], key = admin) =>
    limited.app.inject({
      method: 'POST',
      url: '/v1/web-search/index/documents',
      payload: { documents },
      headers: { authorization: `Bearer ${key}` },
    });

  it('an admin key may write; a document over the character limit is a 413 naming it', async () => {
    expect((await write([{ id: 'a', text: 'short' }], testKey)).statusCode).toBe(403);
    expect((await write([{ id: 'a', text: 'short' }])).statusCode).toBe(200);
    const long = await write([
      { id: 'b', text: 'fine' },
      { id: 'c', title: 'x'.repeat(60), text: 'y'.repeat(41) },
    ]);
    expect(long.statusCode).toBe(413);
    expect(long.json<ErrorBody>().error).toMatchObject({ code: 'payload_too_large', param: 'documents[1]' });
    expect(long.json<ErrorBody>().error.message).toMatch(
      /101 characters .* at most 100 \(ONNX_GATEWAY_INDEX_MAX_DOCUMENT_CHARS\)/,
    );
  });

  it('adding past the document limit is a 413 index_full; replacing is not', async () => {
    expect(
      (
        await write([
          { id: 'b', text: 'two' },
          { id: 'c', text: 'three' },
        ])
      ).statusCode,
    ).toBe(200);
    const full = await write([{ id: 'd', text: 'four' }]);
    expect(full.statusCode).toBe(413);
    expect(full.json<ErrorBody>().error).toMatchObject({ code: 'index_full', param: 'documents' });
    expect(full.json<ErrorBody>().error.message).toMatch(
      /holds 3 documents and these would add 1; it may hold at most 3/,
    );
    expect((await write([{ id: 'c', text: 'three, replaced' }])).json()).toMatchObject({ added: 0, updated: 1 });
    const stats = await limited.app.inject({ method: 'GET', url: '/v1/web-search/index', headers: auth });
    expect(stats.json<IndexStats>().documents).toBe(3);
  });
});
