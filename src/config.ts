/**
 * The one typed configuration. Each setting is declared once below with its default, unit and
 * description; values come from (lowest to highest precedence) the defaults, a JSON file named by
 * ONNX_GATEWAY_CONFIG, environment variables, and CLI flags. README's configuration table is
 * generated from these declarations (`npm run docs:config`), and a test keeps it in step.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

type Kind = 'string' | 'integer' | 'number' | 'boolean' | 'list';

interface Setting<K extends Kind = Kind> {
  kind: K;
  env: string;
  flag: string;
  default: SettingValue<K> | null;
  /** Text for the README table when the default depends on the machine or other settings. */
  defaultText?: string;
  unit?: string;
  min?: number;
  max?: number;
  choices?: readonly string[];
  description: string;
}

type SettingValue<K extends Kind> = K extends 'string'
  ? string
  : K extends 'integer' | 'number'
    ? number
    : K extends 'boolean'
      ? boolean
      : string[];

function setting<K extends Kind>(kind: K, spec: Omit<Setting<K>, 'kind'>): Setting<K> {
  return { kind, ...spec };
}

const cores = availableParallelism();

export const settings = {
  host: setting('string', {
    env: 'ONNX_GATEWAY_HOST', flag: '--host', default: null, defaultText: '0.0.0.0 with API keys, 127.0.0.1 without',
    description: 'Interface to listen on. Without API keys the server refuses to listen beyond loopback.',
  }),
  port: setting('integer', { env: 'ONNX_GATEWAY_PORT', flag: '--port', default: 8080, min: 0, max: 65535, description: 'TCP port to listen on (0 picks a free port).' }),
  apiKeys: setting('list', {
    env: 'ONNX_GATEWAY_API_KEYS', flag: '--api-keys', default: [], description: 'Comma-separated API keys accepted as `Authorization: Bearer <key>`.',
  }),
  apiKeysFile: setting('string', {
    env: 'ONNX_GATEWAY_API_KEYS_FILE', flag: '--api-keys-file', default: null, description: 'File with one API key per line (blank lines and `#` comments ignored), added to the keys above.',
  }),
  modelsDir: setting('string', {
    env: 'ONNX_GATEWAY_MODELS_DIR', flag: '--models-dir', default: '.data/models',
    description: 'Folder of Hugging Face-layout model folders, one per model id.',
  }),
  models: setting('list', {
    env: 'ONNX_GATEWAY_MODELS', flag: '--models', default: [], defaultText: "the catalogue's default embedder and reranker",
    description: 'Comma-separated ids of the models to serve (catalogue ids or folder names in the models dir). `id:int8` serves the int8 variant.',
  }),
  workers: setting('integer', {
    env: 'ONNX_GATEWAY_WORKERS', flag: '--workers', default: null, defaultText: 'cores / intra-op threads', min: 1, max: 256,
    description: 'Inference worker threads, each holding one session per served model.',
  }),
  intraOpThreads: setting('integer', {
    env: 'ONNX_GATEWAY_INTRA_OP_THREADS', flag: '--intra-op-threads', default: 1, min: 1, max: 256,
    description: 'ONNX Runtime intra-op threads per worker. Workers x intra-op threads should not exceed the cores.',
  }),
  ortSpinning: setting('boolean', {
    env: 'ONNX_GATEWAY_ORT_SPINNING', flag: '--ort-spinning', default: false,
    description: 'Let ONNX Runtime threads spin while waiting (uses CPU when idle; only matters with intra-op threads > 1).',
  }),
  ortMemoryArena: setting('boolean', {
    env: 'ONNX_GATEWAY_ORT_MEMORY_ARENA', flag: '--ort-memory-arena', default: true,
    description: 'Use the ONNX Runtime CPU memory arena (faster; keeps peak memory reserved).',
  }),
  maxBatchTokens: setting('integer', {
    env: 'ONNX_GATEWAY_MAX_BATCH_TOKENS', flag: '--max-batch-tokens', default: 16384, unit: 'tokens', min: 1,
    description: 'Token budget of one inference batch, padding included (longest x count).',
  }),
  maxBatchSize: setting('integer', {
    env: 'ONNX_GATEWAY_MAX_BATCH_SIZE', flag: '--max-batch-size', default: 8, unit: 'inputs', min: 1, max: 1024,
    description: 'Most inputs in one inference batch (int8 models always run one input per batch).',
  }),
  queueCapacity: setting('integer', {
    env: 'ONNX_GATEWAY_QUEUE_CAPACITY', flag: '--queue-capacity', default: 16384, unit: 'inputs', min: 1,
    description: 'Inputs waiting per model before new requests get 429 overloaded.',
  }),
  maxInputs: setting('integer', {
    env: 'ONNX_GATEWAY_MAX_INPUTS', flag: '--max-inputs', default: 2048, unit: 'inputs', min: 1,
    description: 'Most inputs (embeddings) or documents (rerank) in one request.',
  }),
  maxInputChars: setting('integer', {
    env: 'ONNX_GATEWAY_MAX_INPUT_CHARS', flag: '--max-input-chars', default: 200_000, unit: 'characters', min: 1,
    description: 'Longest single input text accepted, before tokenisation.',
  }),
  bodyLimit: setting('integer', {
    env: 'ONNX_GATEWAY_BODY_LIMIT', flag: '--body-limit', default: 32 * 1024 * 1024, unit: 'bytes', min: 1024,
    description: 'Largest request body accepted (413 above).',
  }),
  truncate: setting('boolean', {
    env: 'ONNX_GATEWAY_TRUNCATE', flag: '--truncate', default: true,
    description: "Cut embedding inputs longer than the model's window (false: answer 400 input_too_long).",
  }),
  rerankMaxChunks: setting('integer', {
    env: 'ONNX_GATEWAY_RERANK_MAX_CHUNKS', flag: '--rerank-max-chunks', default: 8, min: 1, max: 1024,
    description: 'Overlapping windows a long rerank document is split into (it scores as its best window).',
  }),
  rerankChunkOverlap: setting('integer', {
    env: 'ONNX_GATEWAY_RERANK_CHUNK_OVERLAP', flag: '--rerank-chunk-overlap', default: 64, unit: 'tokens', min: 0,
    description: 'Tokens shared by consecutive windows of a long rerank document.',
  }),
  shutdownTimeout: setting('integer', {
    env: 'ONNX_GATEWAY_SHUTDOWN_TIMEOUT', flag: '--shutdown-timeout', default: 30_000, unit: 'ms', min: 0,
    description: 'On SIGTERM, how long in-flight requests may take to finish before the process exits.',
  }),
  logLevel: setting('string', {
    env: 'ONNX_GATEWAY_LOG_LEVEL', flag: '--log-level', default: 'info', choices: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
    description: 'Log level (structured JSON logs on stdout).',
  }),
} as const;

export type SettingName = keyof typeof settings;
export type Config = { [N in SettingName]: SettingValue<(typeof settings)[N]['kind']> } & {
  host: string;
  workers: number;
  /** Keys from apiKeys and apiKeysFile together. */
  keys: string[];
};
type RawConfig = Partial<Record<SettingName, unknown>>;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

function parseValue(name: string, spec: Setting, raw: unknown): unknown {
  const where = `${name} (${spec.env})`;
  switch (spec.kind) {
    case 'string': {
      const value = String(raw);
      if (spec.choices && !spec.choices.includes(value)) throw new ConfigError(`${where} must be one of ${spec.choices.join(', ')}; got "${value}".`);
      return value;
    }
    case 'integer':
    case 'number': {
      const value = typeof raw === 'number' ? raw : Number(String(raw).trim());
      if (!Number.isFinite(value) || (spec.kind === 'integer' && !Number.isInteger(value))) {
        throw new ConfigError(`${where} must be ${spec.kind === 'integer' ? 'an integer' : 'a number'}; got "${String(raw)}".`);
      }
      if (spec.min !== undefined && value < spec.min) throw new ConfigError(`${where} must be >= ${spec.min}; got ${value}.`);
      if (spec.max !== undefined && value > spec.max) throw new ConfigError(`${where} must be <= ${spec.max}; got ${value}.`);
      return value;
    }
    case 'boolean': {
      if (typeof raw === 'boolean') return raw;
      const text = String(raw).trim().toLowerCase();
      if (['1', 'true', 'yes', 'on'].includes(text)) return true;
      if (['0', 'false', 'no', 'off'].includes(text)) return false;
      throw new ConfigError(`${where} must be true or false; got "${String(raw)}".`);
    }
    case 'list':
      return (Array.isArray(raw) ? raw.map(String) : String(raw).split(',')).map((s) => s.trim()).filter((s) => s.length > 0);
  }
}

function readKeysFile(path: string): string[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError(`apiKeysFile: can not read ${path}: ${(error as Error).message}`);
  }
  return text.split(/\r?\n/).map((line) => line.trim()).filter((line) => line && !line.startsWith('#'));
}

/**
 * Resolves the configuration. `overrides` are already-parsed values (CLI flags, tests);
 * `env` defaults to process.env.
 */
export function loadConfig(overrides: RawConfig = {}, env: NodeJS.ProcessEnv = process.env): Config {
  const fileValues: RawConfig = env.ONNX_GATEWAY_CONFIG ? readConfigFile(env.ONNX_GATEWAY_CONFIG) : {};
  const values: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(settings) as [SettingName, Setting][]) {
    let raw: unknown = spec.default;
    if (fileValues[name] !== undefined) raw = fileValues[name];
    if (env[spec.env] !== undefined && env[spec.env] !== '') raw = env[spec.env];
    if (overrides[name] !== undefined) raw = overrides[name];
    values[name] = raw === null ? null : parseValue(name, spec, raw);
  }
  const config = values as Config;
  config.keys = [...config.apiKeys, ...(config.apiKeysFile ? readKeysFile(config.apiKeysFile) : [])];
  config.workers ??= Math.max(1, Math.floor(cores / config.intraOpThreads));
  config.host ??= config.keys.length > 0 ? '0.0.0.0' : '127.0.0.1';
  if (config.keys.length === 0 && !isLoopback(config.host)) {
    throw new ConfigError(`No API keys are configured, so the server only listens on loopback; host "${config.host}" is not. Set ONNX_GATEWAY_API_KEYS or ONNX_GATEWAY_API_KEYS_FILE.`);
  }
  return config;
}

function readConfigFile(path: string): RawConfig {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as RawConfig;
  } catch (error) {
    throw new ConfigError(`ONNX_GATEWAY_CONFIG: can not read ${path}: ${(error as Error).message}`);
  }
}

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.');
}

/** The README configuration table, generated from the declarations above. */
export function configTable(): string {
  const rows = ['| setting | environment | flag | default | unit | description |', '| --- | --- | --- | --- | --- | --- |'];
  for (const [name, spec] of Object.entries(settings) as [SettingName, Setting][]) {
    const value = spec.defaultText ?? (Array.isArray(spec.default) ? spec.default.join(',') || '(none)' : String(spec.default ?? '(none)'));
    rows.push(`| ${name} | \`${spec.env}\` | \`${spec.flag}\` | ${value} | ${spec.unit ?? ''} | ${spec.description} |`);
  }
  return rows.join('\n');
}
