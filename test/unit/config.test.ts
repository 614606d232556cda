import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configTable, ConfigError, loadConfig, settings } from '../../src/config.js';

describe('config', () => {
  it('has defaults that suit a small machine and listens on loopback without keys', () => {
    const config = loadConfig({}, {});
    expect(config.port).toBe(8080);
    expect(config.host).toBe('127.0.0.1');
    expect(config.intraOpThreads).toBe(1);
    expect(config.workers * config.intraOpThreads).toBeGreaterThanOrEqual(1);
    expect(config.keys).toEqual([]);
    expect(config.truncate).toBe(true);
    expect(config.ortSpinning).toBe(false);
  });

  it('reads the environment, and flags override it', () => {
    const env = { ONNX_GATEWAY_PORT: '9000', ONNX_GATEWAY_API_KEYS: 'a, b,,', ONNX_GATEWAY_TRUNCATE: 'false', ONNX_GATEWAY_MODELS: 'x,y:int8' };
    const config = loadConfig({ port: 9100 }, env);
    expect(config.port).toBe(9100);
    expect(config.keys).toEqual(['a', 'b']);
    expect(config.host).toBe('0.0.0.0');
    expect(config.truncate).toBe(false);
    expect(config.models).toEqual(['x', 'y:int8']);
  });

  it('derives workers from cores and intra-op threads', () => {
    const one = loadConfig({ intraOpThreads: 1 }, {});
    const two = loadConfig({ intraOpThreads: 2 }, {});
    expect(two.workers).toBe(Math.max(1, Math.floor(one.workers / 2)));
  });

  it.each([
    [{ ONNX_GATEWAY_PORT: 'eighty' }, /PORT.*integer/],
    [{ ONNX_GATEWAY_PORT: '70000' }, /<= 65535/],
    [{ ONNX_GATEWAY_TRUNCATE: 'maybe' }, /true or false/],
    [{ ONNX_GATEWAY_LOG_LEVEL: 'loud' }, /one of/],
    [{ ONNX_GATEWAY_HOST: '0.0.0.0' }, /No API keys/],
    [{ ONNX_GATEWAY_API_KEYS_FILE: '/nonexistent/keys' }, /can not read/],
    [{ ONNX_GATEWAY_SEARCH_RANKINGS: 'bm25,splade' }, /SEARCH_RANKINGS.*takes bm25, dense, sparse; got "splade"/],
    [{ ONNX_GATEWAY_SEARCH_RANKINGS: ' , ' }, /SEARCH_RANKINGS.*at least one/],
    [{ ONNX_GATEWAY_SEARCH_INDEX_STREAM_LENGTH: '0' }, />= 1/],
  ])('refuses a bad setting with a message that names it: %o', (env, message) => {
    expect(() => loadConfig({}, env)).toThrow(ConfigError);
    expect(() => loadConfig({}, env)).toThrow(message);
  });

  it('reads the devices: the text models\' one, the map per model, the image pipelines\' one', () => {
    expect(loadConfig({}, {})).toMatchObject({ device: 'cpu', imageDevice: 'cpu', devices: {}, deviceFallback: 'none', gpuMaxBatchTokens: 16384 });
    const env = { ONNX_GATEWAY_DEVICE: 'WebGPU', ONNX_GATEWAY_DEVICE_MAP: 'BAAI/bge-m3=cuda:1, small=cpu,x:int8=dml', ONNX_GATEWAY_IMAGE_DEVICE: 'coreml' };
    const config = loadConfig({}, env);
    expect(config.device).toBe('webgpu');
    expect(config.imageDevice).toBe('coreml');
    expect(config.devices).toEqual({ 'BAAI/bge-m3': 'cuda:1', small: 'cpu', 'x:int8': 'dml' });
    expect(loadConfig({ device: 'cuda:01' }, {}).device).toBe('cuda:1');
  });

  it.each([
    [{ ONNX_GATEWAY_DEVICE: 'gpu' }, /^device \(ONNX_GATEWAY_DEVICE\): "gpu" is not a device: use one of cpu, webgpu, cuda, coreml, dml/],
    [{ ONNX_GATEWAY_DEVICE: 'webgpu:1' }, /^device \(ONNX_GATEWAY_DEVICE\): "webgpu:1" is not a device/],
    [{ ONNX_GATEWAY_DEVICE: 'cuda:x' }, /"cuda:x" is not a device/],
    [{ ONNX_GATEWAY_IMAGE_DEVICE: 'metal' }, /^imageDevice \(ONNX_GATEWAY_IMAGE_DEVICE\): "metal" is not a device/],
    [{ ONNX_GATEWAY_DEVICE_MAP: 'bge-m3' }, /^deviceMap \(ONNX_GATEWAY_DEVICE_MAP\): "bge-m3" is not <model id>=<device>/],
    [{ ONNX_GATEWAY_DEVICE_MAP: '=cuda' }, /^deviceMap \(ONNX_GATEWAY_DEVICE_MAP\): "=cuda" is not <model id>=<device>/],
    [{ ONNX_GATEWAY_DEVICE_MAP: 'bge-m3=gpu' }, /^deviceMap \(ONNX_GATEWAY_DEVICE_MAP\): "gpu" is not a device/],
    [{ ONNX_GATEWAY_DEVICE_MAP: 'a=cuda,a=cpu' }, /^deviceMap \(ONNX_GATEWAY_DEVICE_MAP\): "a" is given a device twice/],
    [{ ONNX_GATEWAY_DEVICE_FALLBACK: 'gpu' }, /DEVICE_FALLBACK.*one of none, cpu/],
    [{ ONNX_GATEWAY_GPU_MAX_BATCH_TOKENS: '0' }, /GPU_MAX_BATCH_TOKENS.*>= 1/],
  ])('refuses a bad device setting with the config error that names it: %o', (env, message) => {
    expect(() => loadConfig({}, env)).toThrow(ConfigError);
    expect(() => loadConfig({}, env)).toThrow(message);
  });

  it('names every setting with an environment variable and a flag', () => {
    for (const spec of Object.values(settings)) {
      expect(spec.env).toMatch(/^ONNX_GATEWAY_[A-Z_]+$/);
      expect(spec.flag).toMatch(/^--[a-z-]+$/);
    }
  });

  it('keeps the README configuration table in step with the declarations', () => {
    const readme = readFileSync('README.md', 'utf8');
    expect(readme).toContain(configTable());
  });
});
