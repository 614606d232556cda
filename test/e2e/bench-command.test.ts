/**
 * `onnx-gateway bench` measures a model in process, or a running server over HTTP, and writes
 * a table, JSON and CSV. Only the shape of the report is asserted: its numbers are timings.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { textOfLength, type BenchPoint } from '../../src/cli/bench-latency.js';
import type { Server } from '../../src/main.js';
import { probeDevice } from '../../src/engine/devices.js';
import { missing } from '../helpers/resources.js';
import { startServer, testKey } from '../helpers/server.js';

const run = promisify(execFile);
/** What --json writes for one model on one device. */
interface BenchReport {
  model: string;
  points: BenchPoint[];
}
const webgpu = await probeDevice('webgpu');

describe('onnx-gateway bench', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'onnx-gateway-bench-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('measures a model in process across batch sizes and lengths, as a table, JSON and CSV', async () => {
    const json = join(dir, 'points.json');
    const csv = join(dir, 'points.csv');
    const { stdout } = await run(
      process.execPath,
      [
        'dist/cli/index.js',
        'bench',
        '--model',
        'tiny-embedder',
        '--models-dir',
        inject('tinyModelsDir'),
        '--workers',
        '1',
        '--batch-sizes',
        '1,4',
        '--seq-lengths',
        '8,32',
        '--requests',
        '3',
        '--json',
        json,
        '--csv',
        csv,
      ],
      { timeout: 120_000 },
    );
    expect(stdout).toMatch(/batch\s+tokens\s+p50 ms\s+p90 ms\s+p99 ms\s+inputs\/s/);
    const report = JSON.parse(await readFile(json, 'utf8')) as BenchReport;
    expect(report.model).toBe('tiny-embedder');
    expect(report.points).toHaveLength(4);
    for (const point of report.points) {
      expect(point.latencyMs.p50).toBeGreaterThan(0);
      expect(point.latencyMs.p99).toBeGreaterThanOrEqual(point.latencyMs.p50);
      expect(point.inputsPerSecond).toBeGreaterThan(0);
      expect(point.breakdownMs.inferenceMs).toBeGreaterThan(0);
    }
    expect(report.points.map((p) => p.batchSize)).toEqual([1, 4, 1, 4]);
    const lines = (await readFile(csv, 'utf8')).trim().split('\n');
    expect(lines[0]).toMatch(/^batch_size,sequence_length,/);
    expect(lines).toHaveLength(5);
  });

  describe('against a running server', () => {
    let server: Server;
    let url: string;
    beforeAll(async () => {
      server = await startServer({ workers: 1 });
      url = await server.app.listen({ host: '127.0.0.1', port: 0 });
    });
    afterAll(() => server?.close());

    it('reads the server-side breakdown from Server-Timing', async () => {
      const json = join(dir, 'server.json');
      await run(
        process.execPath,
        [
          'dist/cli/index.js',
          'bench',
          '--server',
          url,
          '--api-key',
          testKey,
          '--model',
          'tiny-reranker',
          '--task',
          'rerank',
          '--batch-sizes',
          '3',
          '--seq-lengths',
          '16',
          '--requests',
          '2',
          '--json',
          json,
        ],
        { timeout: 120_000 },
      );
      const report = JSON.parse(await readFile(json, 'utf8')) as BenchReport;
      expect(report.points).toHaveLength(1);
      expect(report.points[0]!.breakdownMs.inferenceMs).toBeGreaterThan(0);
      expect(Number.isFinite(report.points[0]!.breakdownMs.tokenizeMs)).toBe(true);
    });
  });

  it.skipIf(
    missing(
      webgpu === undefined,
      `no WebGPU adapter here (${webgpu}): on Debian, Mesa's Vulkan drivers from bookworm-backports, as .ci/run installs them`,
    ),
  )('measures the same workloads on a device and on the CPU with --device, one JSON entry each', async () => {
    const json = join(dir, 'devices.json');
    const { stdout } = await run(
      process.execPath,
      [
        'dist/cli/index.js',
        'bench',
        '--model',
        'tiny-embedder',
        '--models-dir',
        inject('tinyModelsDir'),
        '--workers',
        '1',
        '--batch-sizes',
        '2',
        '--seq-lengths',
        '16',
        '--requests',
        '2',
        '--device',
        'webgpu',
        '--json',
        json,
      ],
      { timeout: 120_000 },
    );
    expect(stdout).toMatch(/tiny-embedder \(embedding, webgpu\)[\s\S]*tiny-embedder \(embedding, cpu\)/);
    const runs = JSON.parse(await readFile(json, 'utf8')) as Array<{
      device: string;
      points: Array<{ inputsPerSecond: number }>;
    }>;
    expect(runs.map((r) => r.device)).toEqual(['webgpu', 'cpu']);
    for (const entry of runs) expect(entry.points[0]!.inputsPerSecond).toBeGreaterThan(0);
  });

  it("refuses a device that is not one, with the setting's error", async () => {
    const refused = run(process.execPath, [
      'dist/cli/index.js',
      'bench',
      '--model',
      'tiny-embedder',
      '--models-dir',
      inject('tinyModelsDir'),
      '--device',
      'gpu',
    ]);
    await expect(refused).rejects.toMatchObject({
      code: 2,
      stderr: expect.stringContaining('device (ONNX_GATEWAY_DEVICE): "gpu" is not a device') as unknown,
    });
  });

  it('builds texts of about the asked length', () => {
    expect(textOfLength(10, 0).split(' ')).toHaveLength(8);
  });
});
