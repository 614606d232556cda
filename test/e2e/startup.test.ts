/**
 * A configured model that is missing or broken, or that can not be downloaded, stops the start
 * with a message that says what is wrong and how to fix it.
 */
import { execFile } from 'node:child_process';
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { listeningUrl, spawnTinyServer } from '../helpers/server-process.js';

const run = promisify(execFile);

async function serve(env: Record<string, string>): Promise<{ code: number; stderr: string; stdout: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['dist/cli/index.js', 'serve'], {
      env: { ...process.env, ONNX_GATEWAY_PORT: '0', ONNX_GATEWAY_LOG_LEVEL: 'error', ...env },
      timeout: 60_000,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('start-up checks', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'onnx-gateway-startup-'));
    await cp(join(inject('tinyModelsDir'), 'tiny-embedder'), join(dir, 'broken-embedder'), { recursive: true });
    await writeFile(join(dir, 'broken-embedder', 'onnx', 'model.onnx'), 'this is not an ONNX file');
    await cp(join(inject('tinyModelsDir'), 'tiny-embedder'), join(dir, 'no-tokenizer'), { recursive: true });
    await rm(join(dir, 'no-tokenizer', 'tokenizer.json'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('refuses to start when a model folder is missing, naming the folder', async () => {
    const result = await serve({
      ONNX_GATEWAY_MODELS_DIR: dir,
      ONNX_GATEWAY_MODELS: 'nowhere-model',
      ONNX_GATEWAY_DOWNLOAD: 'false',
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('nowhere-model');
    expect(result.stderr).toMatch(/does not exist/);
  });

  it('names the missing files of an incomplete model', async () => {
    const result = await serve({
      ONNX_GATEWAY_MODELS_DIR: dir,
      ONNX_GATEWAY_MODELS: 'no-tokenizer',
      ONNX_GATEWAY_DOWNLOAD: 'false',
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('tokenizer.json');
  });

  it('says how to get a catalogue model that is missing', async () => {
    const result = await serve({
      ONNX_GATEWAY_MODELS_DIR: dir,
      ONNX_GATEWAY_MODELS: 'synthetic-all-MiniLM-L6-v2',
      ONNX_GATEWAY_DOWNLOAD: 'false',
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('make_models.py');
  });

  it('exits when a worker can not load a broken ONNX file, saying which file', async () => {
    const result = await serve({
      ONNX_GATEWAY_MODELS_DIR: dir,
      ONNX_GATEWAY_MODELS: 'broken-embedder',
      ONNX_GATEWAY_DOWNLOAD: 'false',
    });
    expect(result.code).toBe(1);
    expect(result.stdout + result.stderr).toContain('broken-embedder');
  });

  it('says where the models were looked for and the three ways forward when the Hub can not be reached', async () => {
    // A loopback port nothing listens on: refused at once, as on a machine without the Hub.
    const hub = `http://127.0.0.1:${await closedPort()}`;
    const result = await serve({
      ONNX_GATEWAY_MODELS_DIR: dir,
      ONNX_GATEWAY_MODELS: 'all-MiniLM-L6-v2',
      HF_ENDPOINT: hub,
      ONNX_GATEWAY_HF_ENDPOINT: hub,
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`onnx-gateway can not start:\nCan not reach ${hub}`);
    expect(result.stderr).toContain(`not in the models dir ${dir}`);
    expect(result.stderr).toMatch(/a mirror of the Hub: HF_ENDPOINT=/);
    expect(result.stderr).toContain(`the model folders copied into ${dir}`);
    expect(result.stderr).toMatch(/"onnx-gateway models pull <id>" on a machine that has the Hub/);
  });

  it('refuses a config file key that is no setting with exit code 2, naming the nearest setting', async () => {
    const path = join(dir, 'config.json');
    await writeFile(path, '{"maxBatchToken": 999}');
    const result = await serve({ ONNX_GATEWAY_CONFIG: path });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('"maxBatchToken", which is not a setting; did you mean maxBatchTokens?');
  });

  it('logs one warning for an ONNX_GATEWAY_ variable that is no setting', async () => {
    const server = spawnTinyServer(dir, { ONNX_GATEWAY_MAX_BATCH_TOKEN: '999' });
    try {
      await listeningUrl(server);
      const warnings = server.lines.filter((line) => line.msg.includes('ONNX_GATEWAY_MAX_BATCH_TOKEN '));
      expect(warnings).toEqual([
        expect.objectContaining({
          level: 40,
          msg: expect.stringContaining('did you mean ONNX_GATEWAY_MAX_BATCH_TOKENS?') as unknown,
        }),
      ]);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }
  });

  it('refuses a bad setting with exit code 2', async () => {
    const result = await serve({ ONNX_GATEWAY_WORKERS: 'many' });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/workers.*integer/);
  });
});
