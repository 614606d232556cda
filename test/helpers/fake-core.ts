/**
 * The HTTP app over a fake engine, for tests of HTTP behaviour (validation, auth, errors, the
 * OpenAPI document, routes that run no model) that need no model to run: the registry of the tiny
 * models is real (files read, tokenizers loaded), but no worker thread starts and no ONNX Runtime
 * session opens. The scheduler answers at once with rows made from the token ids, so requests
 * that get past validation still succeed; what the numbers are is for the tests on a real server
 * (server.ts) to check.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, inject } from 'vitest';
import { loadConfig, type Config } from '../../src/config.js';
import type { CoreContext } from '../../src/core/context.js';
import { SearchService } from '../../src/search/service.js';
import type { EngineInput, JobResult } from '../../src/engine/scheduler.js';
import { buildApp } from '../../src/http/app.js';
import { loadCatalogue } from '../../src/models/catalogue.js';
import { Registry, type ServedModel } from '../../src/models/registry.js';
import { auth, testKey } from './server.js';

export interface FakeApp {
  app: FastifyInstance;
  registry: Registry;
  config: Config;
  close(): Promise<void>;
}

/** A row per input: the model's width (an embedder's dimensions, a reranker's logits) of values drawn from its ids. */
function fakeRows(model: ServedModel, inputs: EngineInput[]): JobResult {
  const width =
    model.task === 'embedding'
      ? model.dimensions
      : model.task === 'classify'
        ? model.labels.length
        : model.rerankScoring.kind === 'softmax'
          ? model.rerankScoring.labels
          : 1;
  const output = new Float32Array(inputs.length * width);
  inputs.forEach(({ ids }, row) => {
    const seed = ids.reduce((sum, id, i) => sum + id * (i + 1), 0);
    for (let d = 0; d < width; d++) output[row * width + d] = Math.sin(seed + d);
  });
  return { output, width, queueMs: 0, loadMs: 0, inferenceMs: 0, batches: 1 };
}

/**
 * The app over the tiny models, with the test key, a data dir of its own and the local search
 * provider; `overrides` are settings as in startServer, `models` may change the served models
 * (to serve variants the files do not have, say).
 */
export async function startFakeApp(
  overrides: Partial<Record<keyof Config, unknown>> = {},
  models: (loaded: ServedModel[]) => ServedModel[] = (loaded) => loaded,
): Promise<FakeApp> {
  const dataDir = mkdtempSync(join(tmpdir(), 'onnx-gateway-fake-'));
  const config = loadConfig(
    {
      modelsDir: inject('tinyModelsDir'),
      dataDir,
      models: ['tiny-embedder', 'tiny-reranker'],
      apiKeys: [testKey],
      logLevel: 'silent',
      ...overrides,
    },
    {},
  );
  const loaded = await Registry.load(config.models, config.modelsDir, loadCatalogue(config.manifestsDir));
  const registry = new Registry(models(loaded.list()));
  const scheduler = {
    submit: (id: string, inputs: EngineInput[]) =>
      Promise.resolve(
        fakeRows(
          registry.list().find((m) => m.id === id)!,
          inputs,
        ),
      ),
  };
  const core: CoreContext = { registry, scheduler, limits: config };
  const search = await SearchService.open(core, config);
  try {
    const app = await buildApp({ config, core, registry, isReady: () => true, search });
    return {
      app,
      registry,
      config,
      async close() {
        await app.close();
        await search.close();
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await search.close();
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
}

/**
 * One fake app for a test file: started before its tests, closed after them. `app()` is the app
 * while the tests run; `post` and `get` send the test key unless given other headers.
 */
export function useFakeApp(overrides: Partial<Record<keyof Config, unknown>> = {}) {
  let current: FakeApp | undefined;
  beforeAll(async () => {
    current = await startFakeApp(overrides);
  });
  afterAll(() => current?.close());
  const app = () => current!.app;
  return {
    app,
    post: (url: string, body: unknown, headers: Record<string, string> = auth) =>
      app().inject({ method: 'POST', url, payload: body as object, headers }),
    get: (url: string, headers: Record<string, string> = auth) => app().inject({ method: 'GET', url, headers }),
  };
}
