import { copyFile, cp, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { ConfigError } from '../../src/config.js';
import { checkDevices, DeviceUnavailableError } from '../../src/engine/devices.js';
import { loadCatalogue } from '../../src/models/catalogue.js';
import { loadServedModel, wantedDevices } from '../../src/models/registry.js';
import { executionProviders } from '../../src/worker/session-options.js';

describe('where each model runs', () => {
  const catalogue = loadCatalogue();

  it('gives each configured model its map entry, by the id it is configured by, its repo id or its catalogue id, else the device', () => {
    const ids = ['bge-m3', 'sentence-transformers/all-MiniLM-L6-v2', 'e5-small-v2:int8', 'my-folder-model'];
    const map = { 'BAAI/bge-m3': 'cuda:1', 'all-MiniLM-L6-v2': 'webgpu', 'intfloat/e5-small-v2': 'cpu' };
    expect(Object.fromEntries(wantedDevices(ids, 'dml', map, catalogue))).toEqual({
      'bge-m3': 'cuda:1',
      'sentence-transformers/all-MiniLM-L6-v2': 'webgpu',
      'e5-small-v2:int8': 'cpu',
      'my-folder-model': 'dml',
    });
    // Without a list, the catalogue's defaults are served, and placed.
    expect([...wantedDevices([], 'webgpu', {}, catalogue).values()]).toEqual(catalogue.defaults().map(() => 'webgpu'));
  });

  it('refuses a map entry that names no served model, with the config error that names the setting', () => {
    const wanted = () => wantedDevices(['bge-m3'], 'cpu', { 'bge-m3': 'cuda', 'bge-m4': 'cuda' }, catalogue);
    expect(wanted).toThrow(ConfigError);
    expect(wanted).toThrow(
      'deviceMap (ONNX_GATEWAY_DEVICE_MAP) names "bge-m4", which is not served: the served models are bge-m3.',
    );
  });

  it("serves the fp16 graph on an accelerator where the folder has one and no variant is named, under the model's own id", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'onnx-gateway-devices-'));
    await cp(join(inject('tinyModelsDir'), 'tiny-embedder'), join(dir, 'tiny-embedder'), { recursive: true });
    const load = (id: string, device: string) => loadServedModel(id, dir, catalogue, 'fp32', device);
    // Without an fp16 graph: fp32 everywhere.
    expect((await load('tiny-embedder', 'webgpu')).variant).toBe('fp32');
    await copyFile(
      join(dir, 'tiny-embedder', 'onnx', 'model.onnx'),
      join(dir, 'tiny-embedder', 'onnx', 'model_fp16.onnx'),
    );
    const onGpu = await load('tiny-embedder', 'cuda:1');
    expect(onGpu).toMatchObject({ id: 'tiny-embedder', variant: 'fp16', device: 'cuda:1' });
    expect(onGpu.onnxPath).toBe(join(dir, 'tiny-embedder', 'onnx', 'model_fp16.onnx'));
    expect(await load('tiny-embedder', 'cpu')).toMatchObject({ id: 'tiny-embedder', variant: 'fp32', device: 'cpu' });
    // A variant named is served as named.
    expect(await load('tiny-embedder:fp32', 'webgpu')).toMatchObject({ id: 'tiny-embedder', variant: 'fp32' });
    expect(await load('tiny-embedder:fp16', 'cpu')).toMatchObject({ id: 'tiny-embedder:fp16', variant: 'fp16' });
  });

  it("asks ONNX Runtime for each device's execution provider", () => {
    expect(executionProviders('cpu')).toEqual(['cpu']);
    expect(executionProviders('webgpu')).toEqual(['webgpu']);
    expect(executionProviders('cuda')).toEqual([{ name: 'cuda', deviceId: 0 }]);
    expect(executionProviders('cuda:2')).toEqual([{ name: 'cuda', deviceId: 2 }]);
    expect(executionProviders('coreml')).toEqual(['coreml']);
    expect(executionProviders('dml')).toEqual(['dml']);
  });

  describe('devices this machine can not use', () => {
    const wanted = new Map([
      ['big', 'cuda'],
      ['small', 'cpu'],
      ['other', 'cuda'],
      ['image', 'webgpu'],
    ]);
    const probed: string[] = [];
    const probe = (device: string) => {
      probed.push(device);
      return Promise.resolve(device === 'cuda' ? 'Failed to load shared library' : undefined);
    };

    it('probes each accelerator once, never the CPU', async () => {
      probed.length = 0;
      await checkDevices({ wanted, fallback: 'cpu', probe });
      expect(probed.sort()).toEqual(['cuda', 'webgpu']);
    });

    it('stop the start with the device, what ONNX Runtime said, what to install and the fallback setting', async () => {
      const check = checkDevices({ wanted, fallback: 'none', probe });
      await expect(check).rejects.toThrow(DeviceUnavailableError);
      await expect(checkDevices({ wanted, fallback: 'none', probe })).rejects.toMatchObject({
        code: 'device_unavailable',
        message: expect.stringMatching(
          /^Device "cuda" \(for big, other\) can not be used: ONNX Runtime says "Failed to load shared library"\. .*ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules\/onnxruntime-node\/script\/install.* Or set ONNX_GATEWAY_DEVICE_FALLBACK=cpu/,
        ) as unknown,
      });
    });

    it('with the CPU fallback, run their models on the CPU and say so once per device', async () => {
      const { devices, warnings } = await checkDevices({ wanted, fallback: 'cpu', probe });
      expect(Object.fromEntries(devices)).toEqual({ big: 'cpu', small: 'cpu', other: 'cpu', image: 'webgpu' });
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(
        /^Device "cuda" \(for big, other\) can not be used: .* Serving big, other on cpu instead \(ONNX_GATEWAY_DEVICE_FALLBACK=cpu\)\.$/,
      );
    });
  });
});
