import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { configTable, ConfigError, loadConfig, settings, unknownVariables } from '../../src/config.js';

/** A config file holding `text`, as ONNX_GATEWAY_CONFIG names it. */
function configFile(text: string): { ONNX_GATEWAY_CONFIG: string } {
  const path = join(mkdtempSync(join(tmpdir(), 'onnx-gateway-config-')), 'config.json');
  writeFileSync(path, text);
  return { ONNX_GATEWAY_CONFIG: path };
}

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
    const env = {
      ONNX_GATEWAY_PORT: '9000',
      ONNX_GATEWAY_API_KEYS: 'a, b,,',
      ONNX_GATEWAY_TRUNCATE: 'false',
      ONNX_GATEWAY_MODELS: 'x,y:int8',
    };
    const config = loadConfig({ port: 9100 }, env);
    expect(config.port).toBe(9100);
    expect(config.keys).toEqual(['a', 'b']);
    expect(config.host).toBe('0.0.0.0');
    expect(config.truncate).toBe(false);
    expect(config.models).toEqual(['x', 'y:int8']);
  });

  it("reads keepAlive as Ollama's keep_alive: never unload by default", () => {
    expect(loadConfig({}, {})).toMatchObject({ keepAlive: '-1', keepAliveMs: Number.POSITIVE_INFINITY });
    expect(loadConfig({}, { ONNX_GATEWAY_KEEP_ALIVE: '1h30m' }).keepAliveMs).toBe(5_400_000);
    expect(loadConfig({}, { ONNX_GATEWAY_KEEP_ALIVE: '300' }).keepAliveMs).toBe(300_000);
    expect(loadConfig({ keepAlive: 0 }, {}).keepAliveMs).toBe(0);
  });

  it('accepts admin keys as API keys too, so they also count as keys for the host', () => {
    const config = loadConfig({}, { ONNX_GATEWAY_API_KEYS: 'a,b', ONNX_GATEWAY_ADMIN_KEYS: 'b,root' });
    expect(config.keys).toEqual(['a', 'b', 'root']);
    expect(config.adminKeys).toEqual(['b', 'root']);
    const adminOnly = loadConfig({}, { ONNX_GATEWAY_ADMIN_KEYS: 'root' });
    expect(adminOnly).toMatchObject({ keys: ['root'], host: '0.0.0.0' });
    expect(loadConfig({}, { ONNX_GATEWAY_PULL_ALLOW: '*, BAAI ,intfloat/e5-small-v2' }).pullAllow).toEqual([
      '*',
      'BAAI',
      'intfloat/e5-small-v2',
    ]);
    expect(loadConfig({}, {}).pullAllow).toEqual([]);
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
    [
      { ONNX_GATEWAY_KEEP_ALIVE: '5 minutes' },
      /^keepAlive \(ONNX_GATEWAY_KEEP_ALIVE\) must be a duration such as "5m".*; got "5 minutes"\.$/,
    ],
    [{ ONNX_GATEWAY_KEEP_ALIVE: '1d' }, /ONNX_GATEWAY_KEEP_ALIVE.*got "1d"/],
    [{ ONNX_GATEWAY_PULL_ALLOW: 'BAAI, a/b/c' }, /PULL_ALLOW.*got "a\/b\/c"/],
    [
      { ONNX_GATEWAY_CORS_ORIGINS: 'https://app.example/path' },
      /corsOrigins: "https:\/\/app.example\/path" is not a web origin/,
    ],
    [{ ONNX_GATEWAY_CORS_ORIGINS: '*' }, /corsOrigins: "\*" is not a web origin/],
  ])('refuses a bad setting with a message that names it: %o', (env, message) => {
    expect(() => loadConfig({}, env)).toThrow(ConfigError);
    expect(() => loadConfig({}, env)).toThrow(message);
  });

  it('reads a config file, below the environment', () => {
    const env = configFile('{"maxBatchTokens": 999, "port": 9001}');
    expect(loadConfig({}, env)).toMatchObject({ maxBatchTokens: 999, port: 9001 });
    expect(loadConfig({}, { ...env, ONNX_GATEWAY_PORT: '9002' }).port).toBe(9002);
  });

  it('refuses a config file key that is no setting, naming it and the nearest setting', () => {
    const env = configFile('{"maxBatchToken": 999}');
    expect(() => loadConfig({}, env)).toThrow(ConfigError);
    expect(() => loadConfig({}, env)).toThrow(
      /sets "maxBatchToken", which is not a setting; did you mean maxBatchTokens\?$/,
    );
    expect(() => loadConfig({}, configFile('{"MaxInputs": 3}'))).toThrow(/did you mean maxInputs\?/);
    expect(() => loadConfig({}, configFile('{"colour": "blue"}'))).toThrow(
      /sets "colour", which is not a setting \(docs\/configuration.md lists them\)/,
    );
    expect(() => loadConfig({}, configFile('[1, 2]'))).toThrow(/must hold a JSON object of settings/);
  });

  it('warns once for each ONNX_GATEWAY_ variable that is no setting, with the nearest one', () => {
    const warnings = unknownVariables({
      ONNX_GATEWAY_MAX_BATCH_TOKEN: '999',
      ONNX_GATEWAY_SOMETHING_ELSE: '1',
      ONNX_GATEWAY_PORT: '9000',
      ONNX_GATEWAY_CONFIG: 'config.json',
      LANG: 'C.UTF-8',
    });
    expect(warnings).toEqual([
      'ONNX_GATEWAY_MAX_BATCH_TOKEN is not a setting and is ignored; did you mean ONNX_GATEWAY_MAX_BATCH_TOKENS?',
      'ONNX_GATEWAY_SOMETHING_ELSE is not a setting and is ignored (docs/configuration.md lists them)',
    ]);
  });

  it("reads the devices: the text models' one, the map per model, the image pipelines' one", () => {
    expect(loadConfig({}, {})).toMatchObject({
      device: 'cpu',
      imageDevice: 'cpu',
      devices: {},
      deviceFallback: 'none',
      gpuMaxBatchTokens: 16384,
    });
    const env = {
      ONNX_GATEWAY_DEVICE: 'WebGPU',
      ONNX_GATEWAY_DEVICE_MAP: 'BAAI/bge-m3=cuda:1, small=cpu,x:int8=dml',
      ONNX_GATEWAY_IMAGE_DEVICE: 'coreml',
    };
    const config = loadConfig({}, env);
    expect(config.device).toBe('webgpu');
    expect(config.imageDevice).toBe('coreml');
    expect(config.devices).toEqual({ 'BAAI/bge-m3': 'cuda:1', small: 'cpu', 'x:int8': 'dml' });
    expect(loadConfig({ device: 'cuda:01' }, {}).device).toBe('cuda:1');
  });

  it.each([
    [
      { ONNX_GATEWAY_DEVICE: 'gpu' },
      /^device \(ONNX_GATEWAY_DEVICE\): "gpu" is not a device: use one of cpu, webgpu, cuda, coreml, dml/,
    ],
    [{ ONNX_GATEWAY_DEVICE: 'webgpu:1' }, /^device \(ONNX_GATEWAY_DEVICE\): "webgpu:1" is not a device/],
    [{ ONNX_GATEWAY_DEVICE: 'cuda:x' }, /"cuda:x" is not a device/],
    [{ ONNX_GATEWAY_IMAGE_DEVICE: 'metal' }, /^imageDevice \(ONNX_GATEWAY_IMAGE_DEVICE\): "metal" is not a device/],
    [
      { ONNX_GATEWAY_DEVICE_MAP: 'bge-m3' },
      /^deviceMap \(ONNX_GATEWAY_DEVICE_MAP\): "bge-m3" is not <model id>=<device>/,
    ],
    [
      { ONNX_GATEWAY_DEVICE_MAP: '=cuda' },
      /^deviceMap \(ONNX_GATEWAY_DEVICE_MAP\): "=cuda" is not <model id>=<device>/,
    ],
    [{ ONNX_GATEWAY_DEVICE_MAP: 'bge-m3=gpu' }, /^deviceMap \(ONNX_GATEWAY_DEVICE_MAP\): "gpu" is not a device/],
    [
      { ONNX_GATEWAY_DEVICE_MAP: 'a=cuda,a=cpu' },
      /^deviceMap \(ONNX_GATEWAY_DEVICE_MAP\): "a" is given a device twice/,
    ],
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

  it('keeps the configuration table of docs/configuration.md in step with the declarations', () => {
    expect(readFileSync('docs/configuration.md', 'utf8')).toContain(configTable());
  });
});
