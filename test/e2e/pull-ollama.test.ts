/**
 * Ollama's POST /api/pull with the published ollama client against a server whose Hub is a
 * stand-in on loopback: progress in Ollama's shape, `stream: false`, admin keys and pullAllow, the
 * Hub's refusals, and a pull the client cancels (its partial file resumed by the next pull, nothing
 * installed meanwhile).
 */
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { Ollama, type ProgressResponse } from 'ollama';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import type { CoreContext } from '../../src/core/context.js';
import { buildApp } from '../../src/http/app.js';
import { Catalogue } from '../../src/models/catalogue.js';
import { LOCK_FILE } from '../../src/models/lock.js';
import { repoDir, stagingDirOf } from '../../src/models/paths.js';
import { loadServedModel, Registry } from '../../src/models/registry.js';
import { repoFromFolder, sha256, startStandInHub, type HubRepo, type StandInHub } from '../fixtures/stand-in-hub.js';

const REPO = 'onnx-gateway-tests/tiny-embedder';
const REVISION = '0123456789abcdef0123456789abcdef01234567';
const GRAPH = 'onnx/model.onnx';
const userKey = 'user-key-0123456789';
const adminKey = 'admin-key-0123456789';

let root: string;
let repo: HubRepo;
let hub: StandInHub;
let modelsDir: string;
let app: FastifyInstance;
let base: string;
/** The ids the app handed to onModelPulled, with whether the model loaded from its folder then. */
const pulled: Array<{ id: string; servable: boolean }> = [];

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'onnx-gateway-pull-ollama-'));
  repo = await repoFromFolder(join(inject('tinyModelsDir'), 'tiny-embedder'), REPO, REVISION);
  hub = await startStandInHub([repo]);
});
afterAll(async () => {
  await app?.close();
  await hub?.close();
  await rm(root, { recursive: true, force: true });
});

let run = 0;
beforeEach(async () => {
  await app?.close();
  modelsDir = join(root, `models-${++run}`);
  const pullAllow = ['onnx-gateway-tests', 'BAAI/bge-small-en-v1.5'];
  const config = loadConfig(
    {
      modelsDir,
      models: [],
      hfEndpoint: hub.url,
      apiKeys: [userKey],
      adminKeys: [adminKey],
      pullAllow,
      logLevel: 'silent',
    },
    {},
  );
  // No model is served and none runs: the pull is all these tests do.
  const registry = new Registry([]);
  const core: CoreContext = {
    registry,
    scheduler: { submit: () => Promise.reject(new Error('no model runs here')) },
    limits: config,
  };
  const onModelPulled = async (id: string) => {
    const servable = await loadServedModel(id, modelsDir, new Catalogue([])).then(
      () => true,
      () => false,
    );
    pulled.push({ id, servable });
  };
  app = await buildApp({ config, core, registry, isReady: () => true, onModelPulled });
  await app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  for (const key of Object.keys(hub.faults)) delete hub.faults[key as keyof typeof hub.faults];
  hub.requests.length = 0;
  pulled.length = 0;
});

const ollama = (key: string) => new Ollama({ host: base, headers: { Authorization: `Bearer ${key}` } });
const dir = () => repoDir(modelsDir, REPO);
const graphDigest = () => `sha256:${sha256(repo.files.get(GRAPH)!)}`;
const graphSize = () => repo.files.get(GRAPH)!.length;

async function collect(lines: AsyncIterable<ProgressResponse>): Promise<ProgressResponse[]> {
  const all: ProgressResponse[] = [];
  for await (const line of lines) all.push(line);
  return all;
}

describe('POST /api/pull with the ollama client', () => {
  it("pulls a repository with an admin key, streaming progress in Ollama's shape, and hands the model on", async () => {
    const lines = await collect(await ollama(adminKey).pull({ model: REPO, stream: true }));
    expect(lines[0]).toEqual({ status: 'pulling manifest' });
    expect(lines.slice(-3).map((line) => line.status)).toEqual([
      'verifying sha256 digest',
      'writing manifest',
      'success',
    ]);
    // The graph, stored with Git LFS, is named by its sha256 as Ollama names a layer; its last line says it is whole.
    const graph = lines.filter((line) => line.digest === graphDigest());
    expect(graph[0]).toMatchObject({
      status: `pulling ${sha256(repo.files.get(GRAPH)!).slice(0, 12)}`,
      total: graphSize(),
    });
    expect(graph.at(-1)).toMatchObject({ total: graphSize(), completed: graphSize() });
    expect(graph.every((line, i) => i === 0 || line.completed >= graph[i - 1]!.completed)).toBe(true);
    // Every other file is named by its git blob sha1, and each ends complete.
    const digests = new Set(lines.filter((line) => line.digest).map((line) => line.digest));
    expect(digests.size).toBe(repo.files.size);
    expect(
      [...digests]
        .filter((digest) => digest !== graphDigest())
        .every((digest) => /^git-sha1:[0-9a-f]{40}$/.test(digest)),
    ).toBe(true);

    for (const [path, bytes] of repo.files) expect((await readFile(join(dir(), path))).equals(bytes), path).toBe(true);
    expect(existsSync(join(dir(), LOCK_FILE))).toBe(true);
    expect(pulled).toEqual([{ id: REPO, servable: true }]);
  });

  it('answers once with stream false; a name as Ollama writes Hub models pulls the same repository', async () => {
    const once = await fetch(`${base}/api/pull`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: REPO, stream: false }),
    });
    expect(once.status).toBe(200);
    expect(once.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await once.text()).toBe('{"status":"success"}');
    // The client sends `name`; `hf.co/` and the tag `:latest` are Ollama's way to write a Hub model.
    hub.requests.length = 0;
    expect(await ollama(adminKey).pull({ model: `hf.co/${REPO}:latest`, stream: false })).toEqual({
      status: 'success',
    });
    // The files on disk matched the Hub: nothing was fetched again.
    expect(hub.requests.filter((r) => r.server === 'cdn' || r.path.includes('/resolve/'))).toEqual([]);
    expect(pulled.map((p) => p.id)).toEqual([REPO, REPO]);
  });

  it('refuses a key that is not an admin key, and a repository pullAllow does not name, with 403', async () => {
    const notAdmin = await ollama(userKey)
      .pull({ model: REPO, stream: true })
      .catch((e: unknown) => e);
    expect(notAdmin).toMatchObject({
      status_code: 403,
      error: expect.stringMatching(/admin key \(ONNX_GATEWAY_ADMIN_KEYS\)/) as unknown,
    });
    const notAllowed = await ollama(adminKey)
      .pull({ model: 'someone-else/model', stream: true })
      .catch((e: unknown) => e);
    const refusal = /someone-else\/model can not be pulled here: ONNX_GATEWAY_PULL_ALLOW/;
    expect(notAllowed).toMatchObject({ status_code: 403, error: expect.stringMatching(refusal) as unknown });
    const noKey = await new Ollama({ host: base }).pull({ model: REPO }).catch((e: unknown) => e);
    expect(noKey).toMatchObject({ status_code: 401 });
    expect(hub.requests).toEqual([]);
    expect(existsSync(modelsDir)).toBe(false);
  });

  it("passes on the Hub's refusal: an error line mid-stream, a 404 without a stream", async () => {
    const missing = 'onnx-gateway-tests/no-such-model';
    const streamed = await ollama(adminKey).pull({ model: missing, stream: true });
    const error = await collect(streamed).catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/The Hub has no repository onnx-gateway-tests\/no-such-model/);
    const once = await ollama(adminKey)
      .pull({ model: missing, stream: false })
      .catch((e: unknown) => e);
    expect(once).toMatchObject({
      status_code: 404,
      error: expect.stringMatching(/no repository onnx-gateway-tests\/no-such-model/) as unknown,
    });
    // A bad variant tag is the request's fault.
    const tag = await ollama(adminKey)
      .pull({ model: `${REPO}:q4_K_M` })
      .catch((e: unknown) => e);
    expect(tag).toMatchObject({ status_code: 400, error: expect.stringMatching(/q4_K_M/) as unknown });
    expect(pulled).toEqual([]);
  });

  it('stops when the client goes away: the partial file stays, nothing is installed, and the next pull resumes it', async () => {
    const half = Math.floor(graphSize() / 2);
    hub.faults.stall = { path: GRAPH, afterBytes: half, times: 1 };
    const progress = await ollama(adminKey).pull({ model: REPO, stream: true });
    let seen: ProgressResponse | undefined;
    for await (const line of progress) {
      if (line.digest === graphDigest() && line.completed > 0) {
        seen = line;
        progress.abort();
        break;
      }
    }
    expect(seen!.completed).toBeLessThanOrEqual(half);
    // What arrived is on disk, in the staging folder, as the partial file a pull resumes.
    const part = join(stagingDirOf(dir()), `${GRAPH}.part`);
    expect((await stat(part)).size).toBeGreaterThanOrEqual(seen!.completed);
    expect(existsSync(dir())).toBe(false);
    await expect(loadServedModel(REPO, modelsDir, new Catalogue([]))).rejects.toThrow();
    expect(pulled).toEqual([]);

    // The next pull (it waits for the cancelled one to wind down) continues the file from where it stopped.
    const lines = await collect(await ollama(adminKey).pull({ model: REPO, stream: true }));
    expect(lines.at(-1)).toEqual({ status: 'success' });
    const resumed = hub.requests.filter((r) => r.server === 'cdn' && r.method === 'GET').at(-1)!;
    const offset = Number(/^bytes=(\d+)-$/.exec(resumed.range ?? '')?.[1]);
    expect(offset).toBeGreaterThanOrEqual(seen!.completed);
    expect(resumed).toMatchObject({ status: 206, sent: graphSize() - offset });
    expect(lines.find((line) => line.digest === graphDigest())).toMatchObject({
      completed: offset,
      total: graphSize(),
    });
    expect((await readFile(join(dir(), GRAPH))).equals(repo.files.get(GRAPH)!)).toBe(true);
    expect(pulled).toEqual([{ id: REPO, servable: true }]);
  });

  it('stops a pull under way when the server shuts down, with an error line, and keeps its partial file', async () => {
    hub.faults.stall = { path: GRAPH, afterBytes: Math.floor(graphSize() / 2), times: 1 };
    const progress = await ollama(adminKey).pull({ model: REPO, stream: true });
    const lines = progress[Symbol.asyncIterator]();
    const underWay = (line: IteratorResult<ProgressResponse, void>) =>
      line.value?.digest === graphDigest() && line.value.completed > 0;
    for (let line = await lines.next(); !underWay(line); line = await lines.next()) expect(line.done).toBe(false);
    const closed = app.close();
    await expect(lines.next()).rejects.toThrow(/shutting down: the pull stopped; its partial files are kept/);
    await closed;
    expect((await stat(join(stagingDirOf(dir()), `${GRAPH}.part`))).size).toBeGreaterThan(0);
    expect(existsSync(dir())).toBe(false);
    expect(pulled).toEqual([]);
  });
});
