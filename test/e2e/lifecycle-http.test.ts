/**
 * The model lifecycle as clients see it, on a real server over HTTP: models loaded on their first
 * request (preload off), GET /v1/models status and placement, the admin's load and unload (403 for
 * other keys, 404 for an unknown id, 400 for a malformed keep_alive, an empty JSON body as no
 * options), Ollama's /api/ps and a
 * request's keep_alive, and a model pulled with /api/pull served without a restart.
 */
import { cp, mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ollama } from 'ollama';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Server } from '../../src/main.js';
import { repoFromFolder, startStandInHub, type StandInHub } from '../fixtures/stand-in-hub.js';
import type { ErrorBody, ModelCard } from '../helpers/bodies.js';
import { auth, startServer } from '../helpers/server.js';

const adminKey = 'admin-key-0123456789';
const admin = { authorization: `Bearer ${adminKey}` };
const PULLED = 'onnx-gateway-tests/pulled-embedder';

let server: Server;
let hub: StandInHub;
let modelsDir: string;
let base: string;
beforeAll(async () => {
  // A models dir of its own: the pull writes into it.
  modelsDir = await mkdtemp(join(tmpdir(), 'onnx-gateway-lifecycle-http-'));
  await cp(inject('tinyModelsDir'), modelsDir, { recursive: true });
  hub = await startStandInHub([
    await repoFromFolder(
      join(inject('tinyModelsDir'), 'tiny-embedder'),
      PULLED,
      '0123456789abcdef0123456789abcdef01234567',
    ),
  ]);
  server = await startServer({
    modelsDir,
    preload: false,
    adminKeys: [adminKey],
    hfEndpoint: hub.url,
    pullAllow: ['onnx-gateway-tests'],
  });
  await server.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(server.app.server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await server?.close();
  await hub?.close();
  await rm(modelsDir, { recursive: true, force: true });
});

const get = (url: string) => server.app.inject({ method: 'GET', url, headers: auth });
const post = (url: string, payload: unknown, headers: Record<string, string> = auth) =>
  server.app.inject({ method: 'POST', url, headers, payload: payload as object });
const status = async (id: string) => (await get(`/v1/models/${id}`)).json<ModelCard>().status;
const embed = async (model: string, extra: object = {}) => {
  const res = await post('/api/embed', { model, input: ['the same text, twice'], ...extra });
  expect(res.statusCode).toBe(200);
  return res.json<{ embeddings: number[][] }>().embeddings[0]!;
};

describe('the model lifecycle over HTTP', () => {
  it('serves with no model loaded, and loads one on its first request', async () => {
    expect((await get('/health')).statusCode).toBe(200);
    expect(await status('tiny-embedder')).toBe('unloaded');
    expect((await get('/v1/models/tiny-embedder')).json<ModelCard>().placement).toBeUndefined();
    // The request that loads the model says how long it waited for the load, as Ollama's load_duration (ns)
    // and as a `load` phase of its Server-Timing; the next one waited for none.
    const loading = await post('/api/embed', { model: 'tiny-embedder', input: ['a first text'] });
    expect(loading.statusCode).toBe(200);
    const { load_duration: loadNs, total_duration: totalNs } = loading.json<{
      load_duration: number;
      total_duration: number;
    }>();
    expect(loadNs).toBeGreaterThan(0);
    expect(loadNs).toBeLessThanOrEqual(totalNs);
    expect(loading.headers['server-timing']).toMatch(/tokenize;dur=[\d.]+, load;dur=[\d.]+, queue;dur=/);
    const loaded = await post('/api/embed', { model: 'tiny-embedder', input: ['a second text'] });
    expect(loaded.json<{ load_duration: number }>().load_duration).toBe(0);
    expect(loaded.headers['server-timing']).not.toMatch(/load;/);
    const model = (await get('/v1/models/tiny-embedder')).json<ModelCard>();
    expect(model.status).toBe('loaded');
    expect(model.placement).toMatchObject({ device: 'cpu', sessions: 2, threads_per_session: 1 });
    expect(model.placement!.resident_bytes).toBeGreaterThan(0);
  });

  it('lets only admin keys load and unload, refuses unknown ids and malformed keep_alive', async () => {
    expect((await post('/v1/models/tiny-reranker/load', {})).statusCode).toBe(403);
    expect((await post('/v1/models/tiny-reranker/unload', {})).json<ErrorBody>().error.code).toBe('forbidden');
    expect((await post('/v1/models/no-such-model/load', {}, admin)).statusCode).toBe(404);
    const bad = await post('/v1/models/tiny-reranker/load', { keep_alive: 'soon' }, admin);
    expect(bad.statusCode).toBe(400);
    expect(bad.json<ErrorBody>().error.param).toBe('keep_alive');
    expect(await status('tiny-reranker')).toBe('unloaded');
    const loaded = await post('/v1/models/tiny-reranker/load', null, admin);
    expect(loaded.statusCode).toBe(200);
    expect(loaded.json()).toMatchObject({ id: 'tiny-reranker', status: 'loaded', placement: { device: 'cpu' } });
    const unloaded = await post('/v1/models/tiny-reranker/unload', {}, admin);
    expect(unloaded.json()).toMatchObject({ id: 'tiny-reranker', status: 'unloaded' });
    expect(unloaded.json<ModelCard>().placement).toBeUndefined();
  });

  it('takes an empty JSON body as no options, as curl sends it with its content-type', async () => {
    const emptyJson = (url: string) =>
      server.app.inject({
        method: 'POST',
        url,
        headers: { ...admin, 'content-type': 'application/json' },
        payload: '',
      });
    const loaded = await emptyJson('/v1/models/tiny-reranker/load');
    expect(loaded.statusCode).toBe(200);
    expect(loaded.json()).toMatchObject({ id: 'tiny-reranker', status: 'loaded' });
    const unloaded = await emptyJson('/v1/models/tiny-reranker/unload');
    expect(unloaded.statusCode).toBe(200);
    expect(unloaded.json()).toMatchObject({ id: 'tiny-reranker', status: 'unloaded' });
  });

  it('gives the same vectors after an unload and a reload', async () => {
    const before = await embed('tiny-embedder');
    expect((await post('/v1/models/tiny-embedder/unload', {}, admin)).statusCode).toBe(200);
    expect(await status('tiny-embedder')).toBe('unloaded');
    expect(await embed('tiny-embedder')).toEqual(before);
  });

  it("answers Ollama's /api/ps with the loaded embedders, and honours a request's keep_alive", async () => {
    await embed('tiny-embedder');
    const ps = await new Ollama({ host: base, headers: auth }).ps();
    const entry = ps.models.find((model) => model.name === 'tiny-embedder:latest')!;
    expect(entry).toMatchObject({ model: 'tiny-embedder:latest', size_vram: 0, details: { format: 'onnx' } });
    expect(entry.size).toBeGreaterThan(0);
    // Kept for ever (the keepAlive setting's default): an expiry centuries ahead, as Ollama gives.
    expect(new Date(entry.expires_at).getFullYear()).toBeGreaterThan(2200);
    // A keep_alive of 30 s: the expiry is that far ahead.
    await embed('tiny-embedder', { keep_alive: '30s' });
    const soon = (await new Ollama({ host: base, headers: auth }).ps()).models.find(
      (model) => model.name === 'tiny-embedder:latest',
    )!;
    const ahead = new Date(soon.expires_at).getTime() - Date.now();
    expect(ahead).toBeGreaterThan(20_000);
    expect(ahead).toBeLessThanOrEqual(30_000);
    // 0: unloaded once the request is done, and gone from /api/ps.
    await embed('tiny-embedder', { keep_alive: 0 });
    await expect.poll(() => status('tiny-embedder'), { timeout: 10_000 }).toBe('unloaded');
    expect(
      (await new Ollama({ host: base, headers: auth }).ps()).models.some(
        (model) => model.name === 'tiny-embedder:latest',
      ),
    ).toBe(false);
    expect((await post('/api/embed', { model: 'tiny-embedder', input: 'x', keep_alive: 'later' })).statusCode).toBe(
      400,
    );
  });

  it('serves a model pulled over HTTP without a restart', async () => {
    expect((await post('/v1/embeddings', { model: PULLED, input: 'x' })).statusCode).toBe(404);
    const ollama = new Ollama({ host: base, headers: admin });
    expect(await ollama.pull({ model: PULLED, stream: false })).toEqual({ status: 'success' });
    expect(await status(PULLED)).toBe('unloaded');
    // The same files as the tiny embedder: the same vectors.
    expect(await embed(PULLED)).toEqual(await embed('tiny-embedder'));
    expect((await ollama.list()).models.map((model) => model.name)).toContain(`${PULLED}:latest`);
  });
});
