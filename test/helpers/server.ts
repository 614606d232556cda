/**
 * Starts a real server (registry, worker pool, app) for tests, on the tiny generated models unless
 * told otherwise. Requests go through app.inject, or over HTTP after listen().
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { inject } from 'vitest';
import { loadConfig, type Config } from '../../src/config.js';
import { createServer, type Server } from '../../src/main.js';

export const testKey = 'test-key-0123456789';

export async function startServer(overrides: Partial<Record<keyof Config, unknown>> = {}): Promise<Server> {
  const config = loadConfig(
    {
      modelsDir: inject('tinyModelsDir'),
      // Search task records and the local index live in the data dir: one per test server.
      dataDir: mkdtempSync(join(tmpdir(), 'onnx-gateway-data-')),
      models: ['tiny-embedder', 'tiny-reranker'],
      apiKeys: [testKey],
      host: '127.0.0.1',
      port: 0,
      workers: 2,
      logLevel: 'silent',
      // Tests of the engine repeat inputs: a hit would answer in its place (the cache's own tests turn it on).
      cacheMaxMb: 0,
      ...overrides,
    },
    {},
  );
  const server = await createServer(config);
  await server.ready;
  return server;
}

export const auth = { authorization: `Bearer ${testKey}` };

/** The models dir holding the shared exact-architecture models, if they have been generated. */
export function sharedModelsDir(): string | undefined {
  const dir = resolve(process.env.ONNX_GATEWAY_MODELS_DIR ?? '.data/models');
  return existsSync(resolve(dir, 'synthetic-all-MiniLM-L6-v2', 'golden.json')) ? dir : undefined;
}

export const sharedModelsHint =
  'needs the synthetic models: python3 ../shared/models/synthetic/make_models.py --out .data/models (or set ONNX_GATEWAY_MODELS_DIR)';
