/**
 * Runs once before the suite: writes the tiny generated models every run uses, so loading and
 * inference are exercised even on a machine without any downloaded or shared models.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { writeTinyModels } from './fixtures/tiny-models.js';

declare module 'vitest' {
  export interface ProvidedContext {
    tinyModelsDir: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = await mkdtemp(join(tmpdir(), 'onnx-gateway-tiny-'));
  await writeTinyModels(dir);
  project.provide('tinyModelsDir', dir);
  return () => rm(dir, { recursive: true, force: true });
}
