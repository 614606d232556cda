/**
 * The one typed configuration. Each setting is declared once below with its default, unit and
 * description; values come from (lowest to highest precedence) the defaults, a JSON file named by
 * ONNX_GATEWAY_CONFIG, environment variables, and CLI flags. docs/configuration.md's table is
 * generated from these declarations (`npm run docs`), and a test keeps it in step. A key of the
 * config file that is no setting stops the start; an `ONNX_GATEWAY_*` variable that is none is
 * warned about (unknownVariables).
 */
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { KEEP_ALIVE_SYNTAX, parseKeepAlive } from './duration.js';
import { DeviceNameError, parseDevice, parseDeviceMap } from './devices.js';
import { StartupError } from './errors.js';
import { isRepoId } from './models/paths.js';
import { VARIANTS } from './models/variants.js';

type Kind = 'string' | 'integer' | 'number' | 'boolean' | 'list';

interface Setting<K extends Kind = Kind> {
  kind: K;
  env: string;
  flag: string;
  default: SettingValue<K> | null;
  /** Text for the docs' table when the default depends on the machine or other settings. */
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
    env: 'ONNX_GATEWAY_HOST',
    flag: '--host',
    default: null,
    defaultText: '0.0.0.0 with API keys, 127.0.0.1 without',
    description: 'Interface to listen on. Without API keys the server refuses to listen beyond loopback.',
  }),
  port: setting('integer', {
    env: 'ONNX_GATEWAY_PORT',
    flag: '--port',
    default: 8080,
    min: 0,
    max: 65535,
    description: 'TCP port to listen on (0 picks a free port).',
  }),
  apiKeys: setting('list', {
    env: 'ONNX_GATEWAY_API_KEYS',
    flag: '--api-keys',
    default: [],
    description: 'Comma-separated API keys accepted as `Authorization: Bearer <key>`.',
  }),
  apiKeysFile: setting('string', {
    env: 'ONNX_GATEWAY_API_KEYS_FILE',
    flag: '--api-keys-file',
    default: null,
    description: 'File with one API key per line (blank lines and `#` comments ignored), added to the keys above.',
  }),
  adminKeys: setting('list', {
    env: 'ONNX_GATEWAY_ADMIN_KEYS',
    flag: '--admin-keys',
    default: [],
    description:
      'Comma-separated API keys that may also manage models over HTTP: the admin routes, such as `POST /api/pull`, answer other keys 403. They are valid on every other route too. With no keys at all the server listens on loopback only and whoever reaches it may manage it, as with Ollama.',
  }),
  indexWriteKeys: setting('list', {
    env: 'ONNX_GATEWAY_INDEX_WRITE_KEYS',
    flag: '--index-write-keys',
    default: [],
    description:
      'Comma-separated API keys that may also add, replace and delete documents of the local search index (admin keys may too); other keys get 403 there and may search it. They are valid on every other route too.',
  }),
  allowedHosts: setting('list', {
    env: 'ONNX_GATEWAY_ALLOWED_HOSTS',
    flag: '--allowed-hosts',
    default: [],
    description:
      'Without API keys, host names besides loopback (localhost, 127.x.x.x, [::1]) that requests may be addressed to (the Host header) and pages may call from (Origin). Others get 403.',
  }),
  corsOrigins: setting('list', {
    env: 'ONNX_GATEWAY_CORS_ORIGINS',
    flag: '--cors-origins',
    default: [],
    description:
      'Web origins (`https://app.example`) whose pages may call the API from a browser (CORS). None: CORS is off.',
  }),
  modelsDir: setting('string', {
    env: 'ONNX_GATEWAY_MODELS_DIR',
    flag: '--models-dir',
    default: '.data/models',
    description: 'Folder of Hugging Face-layout model folders, one per model id.',
  }),
  models: setting('list', {
    env: 'ONNX_GATEWAY_MODELS',
    flag: '--models',
    default: [],
    defaultText: "the catalogue's default embedder and reranker",
    description:
      'Comma-separated ids of the models to serve (catalogue ids or folder names in the models dir). `id:int8` serves the int8 variant.',
  }),
  manifestsDir: setting('string', {
    env: 'ONNX_GATEWAY_MANIFESTS_DIR',
    flag: '--manifests-dir',
    default: null,
    description:
      'Folder of your own model manifests (JSON, as in the shipped `models/`), read after the shipped ones; a manifest with a shipped id replaces it.',
  }),
  download: setting('boolean', {
    env: 'ONNX_GATEWAY_DOWNLOAD',
    flag: '--download',
    default: true,
    description:
      'At start, download configured catalogue models whose files are missing from the Hugging Face Hub (false: refuse to start and say how to get them).',
  }),
  onnxVariant: setting('string', {
    env: 'ONNX_GATEWAY_ONNX_VARIANT',
    flag: '--onnx-variant',
    default: 'fp32',
    choices: VARIANTS,
    description:
      'ONNX graph pulled from a repository (`models pull`, and at start for a model id without `:variant`): fp32 (`onnx/model.onnx`, else `model.onnx`), fp16 (`onnx/model_fp16.onnx`), int8 (`onnx/model_int8.onnx`, `onnx/model_quantized.onnx`, else an `onnx/model_qint8*.onnx`), O1-O4 (`onnx/model_O1.onnx`...).',
  }),
  hfEndpoint: setting('string', {
    env: 'ONNX_GATEWAY_HF_ENDPOINT',
    flag: '--hf-endpoint',
    default: null,
    defaultText: '`HF_ENDPOINT`, else https://huggingface.co',
    description:
      'Base URL of the Hugging Face Hub or a mirror that models are downloaded from. A token for gated or private repositories is read from `HF_TOKEN`.',
  }),
  pullAllow: setting('list', {
    env: 'ONNX_GATEWAY_PULL_ALLOW',
    flag: '--pull-allow',
    default: [],
    description:
      'Hub repositories an admin key may pull over HTTP (`POST /api/pull`): `*` for any, or comma-separated repository ids (`BAAI/bge-small-en-v1.5`) and owners (`BAAI`). Others get 403.',
  }),
  keepAlive: setting('string', {
    env: 'ONNX_GATEWAY_KEEP_ALIVE',
    flag: '--keep-alive',
    default: '-1',
    description:
      "How long a model stays loaded after its last request, as Ollama's keep_alive: a duration (`5m`, `30s`, `1h30m`, `500ms`), a number of seconds, a negative number for until the server stops, 0 to unload after each request. The Ollama routes' `keep_alive` overrides it per request.",
  }),
  device: setting('string', {
    env: 'ONNX_GATEWAY_DEVICE',
    flag: '--device',
    default: 'cpu',
    description:
      'Device the text models run on: `cpu`, `webgpu` (Vulkan on Linux, Metal on macOS, Direct3D 12 on Windows), `cuda` or `cuda:N` (Linux x64, after `ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install`), `coreml` (macOS), `dml` (DirectML, Windows). A model on an accelerator runs as one session, with the fp16 graph where its folder has one and no variant is named (docs/gpu.md).',
  }),
  deviceMap: setting('list', {
    env: 'ONNX_GATEWAY_DEVICE_MAP',
    flag: '--device-map',
    default: [],
    description:
      'Comma-separated `<model id>=<device>` entries that override device per model, e.g. a large embedder on `cuda` while the others stay on `cpu`.',
  }),
  deviceFallback: setting('string', {
    env: 'ONNX_GATEWAY_DEVICE_FALLBACK',
    flag: '--device-fallback',
    default: 'none',
    choices: ['none', 'cpu'],
    description:
      'What happens when a configured device can not be used: `none` stops the start with the reason and what to install; `cpu` serves those models on the CPU instead, with one warning in the log (`GET /v1/models` shows where each model runs).',
  }),
  gpuMaxBatchTokens: setting('integer', {
    env: 'ONNX_GATEWAY_GPU_MAX_BATCH_TOKENS',
    flag: '--gpu-max-batch-tokens',
    default: 16384,
    unit: 'tokens',
    min: 1,
    description:
      "Token budget of one inference batch of a model on an accelerator, padding included (maxBatchTokens is the CPU's); the batch size cap (maxBatchSize) still applies.",
  }),
  workers: setting('integer', {
    env: 'ONNX_GATEWAY_WORKERS',
    flag: '--workers',
    default: null,
    defaultText: 'cores / intra-op threads',
    min: 1,
    max: 256,
    description:
      'Most sessions a text model gets, each in a worker thread of its own. A model gets them all when they fit the memory budget; a large one gets fewer, with the cores shared among them (`GET /v1/models` shows each placement).',
  }),
  intraOpThreads: setting('integer', {
    env: 'ONNX_GATEWAY_INTRA_OP_THREADS',
    flag: '--intra-op-threads',
    default: 1,
    min: 1,
    max: 256,
    description:
      'ONNX Runtime intra-op threads of a session when its model gets all its sessions. Workers x intra-op threads should not exceed the cores.',
  }),
  soloThreads: setting('integer', {
    env: 'ONNX_GATEWAY_SOLO_THREADS',
    flag: '--solo-threads',
    default: null,
    defaultText: 'workers x intra-op threads',
    min: 1,
    max: 256,
    description:
      "Intra-op threads of a model's one solo session, which runs a batch that is alone on the server (nothing else queued or running, e.g. one client at a time) with the whole machine instead of one session's share, ONNX Runtime spinning between runs (which stops within ~50 ms of idleness). It costs one more session of memory and is left out where the budget has no room; set it to the intra-op threads to turn it off.",
  }),
  memoryBudgetMb: setting('integer', {
    env: 'ONNX_GATEWAY_MEMORY_BUDGET_MB',
    flag: '--memory-budget-mb',
    default: null,
    defaultText: "80% of the memory the process may use (its cgroup limit, else the machine's)",
    unit: 'MB',
    min: 1,
    description:
      "Memory all loaded text models together may hold. Each model's placement (sessions, threads each, solo session) is chosen from its measured size to stay inside it; a model that does not fit even as one session is refused with its size and the budget, and a load on demand first unloads the least recently used idle models.",
  }),
  preload: setting('boolean', {
    env: 'ONNX_GATEWAY_PRELOAD',
    flag: '--preload',
    default: true,
    description:
      'Load the served text models at start, placed together in the memory budget (false: each loads on its first request, which waits for it).',
  }),
  ortSpinning: setting('boolean', {
    env: 'ONNX_GATEWAY_ORT_SPINNING',
    flag: '--ort-spinning',
    default: false,
    description:
      'Let ONNX Runtime threads spin while waiting (uses CPU when idle; only matters with intra-op threads > 1).',
  }),
  ortMemoryArena: setting('boolean', {
    env: 'ONNX_GATEWAY_ORT_MEMORY_ARENA',
    flag: '--ort-memory-arena',
    default: true,
    description: 'Use the ONNX Runtime CPU memory arena (faster; keeps peak memory reserved).',
  }),
  maxBatchTokens: setting('integer', {
    env: 'ONNX_GATEWAY_MAX_BATCH_TOKENS',
    flag: '--max-batch-tokens',
    default: 256,
    unit: 'tokens',
    min: 1,
    description:
      'Token budget of one inference batch, padding included (longest x count); an input longer than the budget runs alone. Small on CPUs: see Performance.',
  }),
  maxBatchSize: setting('integer', {
    env: 'ONNX_GATEWAY_MAX_BATCH_SIZE',
    flag: '--max-batch-size',
    default: 32,
    unit: 'inputs',
    min: 1,
    max: 1024,
    description: 'Most inputs in one inference batch (int8 models always run one input per batch).',
  }),
  queueCapacity: setting('integer', {
    env: 'ONNX_GATEWAY_QUEUE_CAPACITY',
    flag: '--queue-capacity',
    default: 16384,
    unit: 'inputs',
    min: 1,
    description: 'Inputs waiting per model before new requests get 429 overloaded.',
  }),
  maxInputs: setting('integer', {
    env: 'ONNX_GATEWAY_MAX_INPUTS',
    flag: '--max-inputs',
    default: 2048,
    unit: 'inputs',
    min: 1,
    description: 'Most inputs (embeddings) or documents (rerank) in one request.',
  }),
  maxInputChars: setting('integer', {
    env: 'ONNX_GATEWAY_MAX_INPUT_CHARS',
    flag: '--max-input-chars',
    default: 200_000,
    unit: 'characters',
    min: 1,
    description: 'Longest single input text accepted, before tokenisation.',
  }),
  bodyLimit: setting('integer', {
    env: 'ONNX_GATEWAY_BODY_LIMIT',
    flag: '--body-limit',
    default: 32 * 1024 * 1024,
    unit: 'bytes',
    min: 1024,
    description: 'Largest request body accepted (413 above).',
  }),
  maxResponseMb: setting('integer', {
    env: 'ONNX_GATEWAY_MAX_RESPONSE_MB',
    flag: '--max-response-mb',
    default: 64,
    unit: 'MB',
    min: 1,
    description:
      "Largest answer of the routes whose answers grow with their inputs (token vectors, sparse vectors, tokens, edited images), bounded from the request's shape before it runs: a request that could need more gets 413 response_too_large, saying how to split it. An image edit of one image may always use one image at imageMaxPixels.",
  }),
  truncate: setting('boolean', {
    env: 'ONNX_GATEWAY_TRUNCATE',
    flag: '--truncate',
    default: true,
    description:
      "Cut inputs longer than the model's window (false: answer 400 input_too_long). For embeddings, false is longInputs refuse where longInputs is not set.",
  }),
  longInputs: setting('string', {
    env: 'ONNX_GATEWAY_LONG_INPUTS',
    flag: '--long-inputs',
    default: null,
    defaultText: 'truncate (refuse where truncate is false)',
    choices: ['truncate', 'chunk', 'refuse'],
    description:
      "What embeddings do with an input longer than the model's window, where the request's `long_inputs` does not say: cut it (truncate), embed it in windows and average them (chunk; dense vectors only, others are cut), or answer 400 input_too_long (refuse).",
  }),
  maxInputTokens: setting('integer', {
    env: 'ONNX_GATEWAY_MAX_INPUT_TOKENS',
    flag: '--max-input-tokens',
    default: 32_768,
    unit: 'tokens',
    min: 1,
    description:
      'Longest input embedded in windows (long_inputs chunk), special tokens included; longer ones get 400 input_too_long.',
  }),
  cacheMaxMb: setting('integer', {
    env: 'ONNX_GATEWAY_CACHE_MAX_MB',
    flag: '--cache-max-mb',
    default: 256,
    unit: 'MB',
    min: 0,
    description:
      'Memory of the embedding cache (pooled vectors by model and exact token ids, least recently used evicted first); 0 keeps none. Hits cost no inference; the `x-cache-hits` header says how many inputs of a response were hits.',
  }),
  cacheShared: setting('boolean', {
    env: 'ONNX_GATEWAY_CACHE_SHARED',
    flag: '--cache-shared',
    default: false,
    description:
      "Share embedding cache entries between replicas through the Redis at redisUrl (looked up after this process's own cache misses; a failing Redis only costs the hits).",
  }),
  cacheTtl: setting('integer', {
    env: 'ONNX_GATEWAY_CACHE_TTL',
    flag: '--cache-ttl',
    default: 86_400,
    unit: 's',
    min: 1,
    description: 'How long an embedding stays in the shared (Redis) cache.',
  }),
  rerankMaxChunks: setting('integer', {
    env: 'ONNX_GATEWAY_RERANK_MAX_CHUNKS',
    flag: '--rerank-max-chunks',
    default: 8,
    min: 1,
    max: 1024,
    description: 'Overlapping windows a long rerank document is split into (it scores as its best window).',
  }),
  rerankChunkOverlap: setting('integer', {
    env: 'ONNX_GATEWAY_RERANK_CHUNK_OVERLAP',
    flag: '--rerank-chunk-overlap',
    default: 64,
    unit: 'tokens',
    min: 0,
    description: 'Tokens shared by consecutive windows of a long rerank document.',
  }),
  teiModels: setting('list', {
    env: 'ONNX_GATEWAY_TEI_MODELS',
    flag: '--tei-models',
    default: [],
    defaultText: 'the first served embedder, reranker and classifier',
    description:
      'Served models that answer the TEI routes, whose requests name no model: `/embed` uses the first embedder listed that gives dense vectors, `/embed_sparse` the first that gives sparse vectors, `/embed_all` the first that gives token vectors (without a list: the first such served model), `/rerank` the first reranker, `/predict` the first classifier; `/info`, `/tokenize` and `/decode` the first listed.',
  }),
  imageModels: setting('list', {
    env: 'ONNX_GATEWAY_IMAGE_MODELS',
    flag: '--image-models',
    default: [],
    defaultText: '(none)',
    description:
      'Comma-separated ids of the image pipelines served by `POST /v1/images/edits` (manifests in `models/images/`, or folders with their own `pipeline.json`).',
  }),
  imageModelsDir: setting('string', {
    env: 'ONNX_GATEWAY_IMAGE_MODELS_DIR',
    flag: '--image-models-dir',
    default: null,
    defaultText: 'the models dir',
    description: 'Folder of image model folders (`<id>/onnx/model.onnx`).',
  }),
  imageWorkers: setting('integer', {
    env: 'ONNX_GATEWAY_IMAGE_WORKERS',
    flag: '--image-workers',
    default: 1,
    min: 1,
    max: 64,
    description:
      'Worker threads of the image lane, a pool apart from the text workers: image edits never take a text worker.',
  }),
  imageDevice: setting('string', {
    env: 'ONNX_GATEWAY_IMAGE_DEVICE',
    flag: '--image-device',
    default: 'cpu',
    description: 'Device the image pipelines run on (the names of device).',
  }),
  imageIntraOpThreads: setting('integer', {
    env: 'ONNX_GATEWAY_IMAGE_INTRA_OP_THREADS',
    flag: '--image-intra-op-threads',
    default: null,
    defaultText: 'half the cores (at least 1)',
    min: 1,
    max: 256,
    description: 'ONNX Runtime intra-op threads per image worker.',
  }),
  imageMemoryArena: setting('boolean', {
    env: 'ONNX_GATEWAY_IMAGE_MEMORY_ARENA',
    flag: '--image-memory-arena',
    default: false,
    description:
      'Use the ONNX Runtime memory arena for image models (off: large fixed-size models such as ISNet peak at about half the memory).',
  }),
  imageConcurrency: setting('integer', {
    env: 'ONNX_GATEWAY_IMAGE_CONCURRENCY',
    flag: '--image-concurrency',
    default: 2,
    min: 1,
    max: 256,
    description:
      'Image edits processed at once (each holds its decoded and output images, about 100 MB at 4K); the others wait in order.',
  }),
  imageQueueCapacity: setting('integer', {
    env: 'ONNX_GATEWAY_IMAGE_QUEUE_CAPACITY',
    flag: '--image-queue-capacity',
    default: 32,
    unit: 'edits',
    min: 0,
    description: 'Image edits waiting for their turn before new ones get 429 overloaded.',
  }),
  imageBodyLimit: setting('integer', {
    env: 'ONNX_GATEWAY_IMAGE_BODY_LIMIT',
    flag: '--image-body-limit',
    default: 128 * 1024 * 1024,
    unit: 'bytes',
    min: 1024,
    description:
      'Largest image edit request body (JSON with base64 images, or the files of a multipart form together; 413 above).',
  }),
  imageMaxEdge: setting('integer', {
    env: 'ONNX_GATEWAY_IMAGE_MAX_EDGE',
    flag: '--image-max-edge',
    default: 4096,
    unit: 'pixels',
    min: 16,
    max: 65535,
    description: 'Longest edge of an output image (`size` above it is a 400).',
  }),
  imageMaxPixels: setting('integer', {
    env: 'ONNX_GATEWAY_IMAGE_MAX_PIXELS',
    flag: '--image-max-pixels',
    default: 4096 * 4096,
    unit: 'pixels',
    min: 256,
    description:
      "Most pixels of an input image, edited or embedded (read from the image's header before anything decodes it: decompression bombs are refused), and of an output image.",
  }),
  embeddingImageMaxBytes: setting('integer', {
    env: 'ONNX_GATEWAY_EMBEDDING_IMAGE_MAX_BYTES',
    flag: '--embedding-image-max-bytes',
    default: 16 * 1024 * 1024,
    unit: 'bytes',
    min: 1024,
    description:
      "Largest image an embedding request may send or name by URL, as encoded (PNG, JPEG or WebP; 413 above). A request's images come to at most bodyLimit together: as base64 in the body, or fetched.",
  }),
  imageUrls: setting('boolean', {
    env: 'ONNX_GATEWAY_IMAGE_URLS',
    flag: '--image-urls',
    default: false,
    description:
      'Let embedding requests name images by http(s) URL, fetched as the web reader fetches pages (public addresses only unless readerAllowPrivate, within readerTimeout, at most embeddingImageMaxBytes each). Off: an image URL is a 400; images come as data URIs.',
  }),
  requestTimeout: setting('integer', {
    env: 'ONNX_GATEWAY_REQUEST_TIMEOUT',
    flag: '--request-timeout',
    default: 0,
    unit: 's',
    min: 0,
    description:
      "How long a request's work may run (waiting in a queue or for its model to load included), from when the route hands it on; past it the work is dropped and the answer is 504 `timeout`. Not for pulls over HTTP, which take as long as the download. 0: as long as it takes (the client's disconnect still drops it).",
  }),
  shutdownTimeout: setting('integer', {
    env: 'ONNX_GATEWAY_SHUTDOWN_TIMEOUT',
    flag: '--shutdown-timeout',
    default: 30_000,
    unit: 'ms',
    min: 0,
    description: 'On SIGTERM, how long in-flight requests may take to finish before the process exits.',
  }),
  readerAllowPrivate: setting('boolean', {
    env: 'ONNX_GATEWAY_READER_ALLOW_PRIVATE',
    flag: '--reader-allow-private',
    default: false,
    description:
      'Let the web reader fetch private, loopback and link-local addresses (off: refused after DNS resolution and on every redirect).',
  }),
  readerMaxBytes: setting('integer', {
    env: 'ONNX_GATEWAY_READER_MAX_BYTES',
    flag: '--reader-max-bytes',
    default: 5 * 1024 * 1024,
    unit: 'bytes',
    min: 1024,
    description: 'Largest page the web reader accepts, after decompression.',
  }),
  readerTimeout: setting('integer', {
    env: 'ONNX_GATEWAY_READER_TIMEOUT',
    flag: '--reader-timeout',
    default: 15_000,
    unit: 'ms',
    min: 1,
    description: 'Longest a web reader fetch may take, redirects included.',
  }),
  readerParseTimeout: setting('integer', {
    env: 'ONNX_GATEWAY_READER_PARSE_TIMEOUT',
    flag: '--reader-parse-timeout',
    default: 5_000,
    unit: 'ms',
    min: 1,
    description:
      'Longest the web reader may take to turn one fetched page into its content (in a worker thread); a page over it answers 422 page_too_complex.',
  }),
  logLevel: setting('string', {
    env: 'ONNX_GATEWAY_LOG_LEVEL',
    flag: '--log-level',
    default: 'info',
    choices: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
    description: 'Log level (structured JSON logs on stdout).',
  }),
  logBodies: setting('boolean', {
    env: 'ONNX_GATEWAY_LOG_BODIES',
    flag: '--log-bodies',
    default: false,
    description:
      'Log every request body (input texts included) at info level, for debugging. Off: logs carry no input text.',
  }),
  dataDir: setting('string', {
    env: 'ONNX_GATEWAY_DATA_DIR',
    flag: '--data-dir',
    default: '.data',
    description:
      "Folder for the server's own state: search task records and the local search index (`search/*.sqlite`), the batches' records (`batch/batches.sqlite`), unless filesDir is set the files API's files, and the graphs of causal LM rerankers cut at load where the models dir can not be written (`cut-graphs/`).",
  }),
  searchProvider: setting('string', {
    env: 'ONNX_GATEWAY_SEARCH_PROVIDER',
    flag: '--search-provider',
    default: 'local',
    choices: ['local', 'searxng'],
    description:
      'Where web search tasks search: `local` (the document index in the data dir) or `searxng` (the instance at searxngUrl).',
  }),
  searxngUrl: setting('string', {
    env: 'ONNX_GATEWAY_SEARXNG_URL',
    flag: '--searxng-url',
    default: null,
    description: 'Base URL of a SearXNG instance with the JSON format enabled (`search.formats` in its settings.yml).',
  }),
  searxngTimeout: setting('integer', {
    env: 'ONNX_GATEWAY_SEARXNG_TIMEOUT',
    flag: '--searxng-timeout',
    default: 10_000,
    unit: 'ms',
    min: 100,
    description: 'Longest wait for a SearXNG answer before the task fails.',
  }),
  redisUrl: setting('string', {
    env: 'ONNX_GATEWAY_REDIS_URL',
    flag: '--redis-url',
    default: null,
    description:
      'Redis (`redis://[:password@]host:port[/db]`) where several replicas share web search task records and their queue, and the local index (writes go through a Redis stream every replica applies to its copy), and with cacheShared embeddings; unset, they stay in the data dir of this process.',
  }),
  searchIndexStreamLength: setting('integer', {
    env: 'ONNX_GATEWAY_SEARCH_INDEX_STREAM_LENGTH',
    flag: '--search-index-stream-length',
    default: 10_000,
    unit: 'entries',
    min: 1,
    description:
      'With redisUrl: index writes the Redis stream keeps before a replica snapshots its index and trims the older ones (a replica further behind loads the snapshot).',
  }),
  indexMaxDocumentChars: setting('integer', {
    env: 'ONNX_GATEWAY_INDEX_MAX_DOCUMENT_CHARS',
    flag: '--index-max-document-chars',
    default: 1_000_000,
    unit: 'characters',
    min: 1,
    description: 'Longest document (title and text) `POST /v1/web-search/index/documents` accepts (413 above).',
  }),
  indexMaxDocuments: setting('integer', {
    env: 'ONNX_GATEWAY_INDEX_MAX_DOCUMENTS',
    flag: '--index-max-documents',
    default: 1_000_000,
    unit: 'documents',
    min: 1,
    description:
      'Most documents the local index holds: adding past it over the API is a 413 (replacing a document is not).',
  }),
  searchConcurrency: setting('integer', {
    env: 'ONNX_GATEWAY_SEARCH_CONCURRENCY',
    flag: '--search-concurrency',
    default: 2,
    min: 1,
    max: 256,
    description: 'Search tasks run at the same time (by each replica, with redisUrl); the others wait in order.',
  }),
  searchMaxPending: setting('integer', {
    env: 'ONNX_GATEWAY_SEARCH_MAX_PENDING',
    flag: '--search-max-pending',
    default: 1000,
    unit: 'tasks',
    min: 1,
    description: 'Search tasks waiting before new ones get 429 overloaded.',
  }),
  searchRetention: setting('integer', {
    env: 'ONNX_GATEWAY_SEARCH_RETENTION',
    flag: '--search-retention',
    default: 86_400,
    unit: 's',
    min: 1,
    description: 'How long finished search task records are kept.',
  }),
  searchTaskTimeout: setting('integer', {
    env: 'ONNX_GATEWAY_SEARCH_TASK_TIMEOUT',
    flag: '--search-task-timeout',
    default: 60_000,
    unit: 'ms',
    min: 100,
    description: 'Longest a search task may run before it fails with `timeout`.',
  }),
  searchFusion: setting('string', {
    env: 'ONNX_GATEWAY_SEARCH_FUSION',
    flag: '--search-fusion',
    default: 'rrf',
    choices: ['rrf', 'mix'],
    description:
      'How the local index fuses its rankings (searchRankings): reciprocal rank fusion or a mix of min-max normalised scores.',
  }),
  searchRankings: setting('list', {
    env: 'ONNX_GATEWAY_SEARCH_RANKINGS',
    flag: '--search-rankings',
    default: ['bm25', 'dense'],
    choices: ['bm25', 'dense', 'sparse'],
    description:
      'Comma-separated rankings of the local index that hybrid search fuses: `bm25` (title and text), `dense` (vectors of the served embedder) and `sparse` (term weights of a served sparse model such as SPLADE, which indexing stores whenever one is served). A ranking with nothing to rank with (no model or no vectors yet) stays out.',
  }),
  searchImageModel: setting('string', {
    env: 'ONNX_GATEWAY_SEARCH_IMAGE_MODEL',
    flag: '--search-image-model',
    default: '',
    description:
      "A served multimodal embedder (CLIP, SigLIP, jina-clip) that embeds the local index's image documents and ranks them against a search's query (`includeImages`), and re-ranks SearXNG's image results by their thumbnails; served whether or not `models` names it. Empty: images are not embedded; searches return the images their results link to.",
  }),
  searchRerankDepth: setting('integer', {
    env: 'ONNX_GATEWAY_SEARCH_RERANK_DEPTH',
    flag: '--search-rerank-depth',
    default: 30,
    unit: 'documents',
    min: 0,
    max: 1000,
    description: 'Fused candidates of the local index the cross-encoder reorders (0: none).',
  }),
  filesDir: setting('string', {
    env: 'ONNX_GATEWAY_FILES_DIR',
    flag: '--files-dir',
    default: null,
    description:
      'Folder of the files API: uploaded batch inputs and the output and error files of batches, streamed to disk. Unset: `files/` in the data dir. With several replicas, a volume they all mount.',
  }),
  fileMaxMb: setting('integer', {
    env: 'ONNX_GATEWAY_FILE_MAX_MB',
    flag: '--file-max-mb',
    default: 200,
    unit: 'MB',
    min: 1,
    description: 'Largest file `POST /v1/files` takes (413 above), as OpenAI allows for batch inputs.',
  }),
  batchMaxRequests: setting('integer', {
    env: 'ONNX_GATEWAY_BATCH_MAX_REQUESTS',
    flag: '--batch-max-requests',
    default: 50_000,
    unit: 'lines',
    min: 1,
    description: "Most requests (lines) in a batch's input file; a longer file fails the batch, as OpenAI's limit.",
  }),
  batchConcurrency: setting('integer', {
    env: 'ONNX_GATEWAY_BATCH_CONCURRENCY',
    flag: '--batch-concurrency',
    default: 2,
    unit: 'batches',
    min: 1,
    description:
      'Batches a server runs at once; the others wait in creation order. With redisUrl: chunks of batches each replica runs at once.',
  }),
  batchInFlight: setting('integer', {
    env: 'ONNX_GATEWAY_BATCH_IN_FLIGHT',
    flag: '--batch-in-flight',
    default: 64,
    unit: 'requests',
    min: 1,
    description:
      "Requests of one batch handed to the models at once (their inputs wait in the scheduler behind every user's request).",
  }),
  batchChunkLines: setting('integer', {
    env: 'ONNX_GATEWAY_BATCH_CHUNK_LINES',
    flag: '--batch-chunk-lines',
    default: 1000,
    unit: 'lines',
    min: 1,
    description:
      'With redisUrl: requests in each chunk of a batch, the unit the replicas share out and the most a killed replica makes another run again.',
  }),
  batchLockSeconds: setting('integer', {
    env: 'ONNX_GATEWAY_BATCH_LOCK_SECONDS',
    flag: '--batch-lock-seconds',
    default: 30,
    unit: 's',
    min: 2,
    description:
      "With redisUrl: how long a replica's hold on a running chunk lasts without renewal (renewed every half of it); a chunk whose replica died runs again elsewhere after at most one and a half times this.",
  }),
} as const;

export type SettingName = keyof typeof settings;
export type Config = { [N in SettingName]: SettingValue<(typeof settings)[N]['kind']> } & {
  host: string;
  memoryBudgetMb: number | null;
  workers: number;
  soloThreads: number;
  imageModelsDir: string;
  imageIntraOpThreads: number;
  /** Keys from apiKeys, apiKeysFile, adminKeys and indexWriteKeys together: every key the API accepts. */
  keys: string[];
  /** keepAlive in milliseconds; FOREVER (Infinity) for a negative keepAlive. */
  keepAliveMs: number;
  /** deviceMap as model id -> device. */
  devices: Record<string, string>;
};
type RawConfig = Partial<Record<SettingName, unknown>>;

export class ConfigError extends StartupError {
  override name = 'ConfigError';
  readonly code = 'config_invalid';
}

function parseValue(name: string, spec: Setting, raw: unknown): unknown {
  const where = `${name} (${spec.env})`;
  switch (spec.kind) {
    case 'string': {
      const value = String(raw);
      if (spec.choices && !spec.choices.includes(value))
        throw new ConfigError(`${where} must be one of ${spec.choices.join(', ')}; got "${value}".`);
      return value;
    }
    case 'integer':
    case 'number': {
      const value = typeof raw === 'number' ? raw : Number(String(raw).trim());
      if (!Number.isFinite(value) || (spec.kind === 'integer' && !Number.isInteger(value))) {
        throw new ConfigError(
          `${where} must be ${spec.kind === 'integer' ? 'an integer' : 'a number'}; got "${String(raw)}".`,
        );
      }
      if (spec.min !== undefined && value < spec.min)
        throw new ConfigError(`${where} must be >= ${spec.min}; got ${value}.`);
      if (spec.max !== undefined && value > spec.max)
        throw new ConfigError(`${where} must be <= ${spec.max}; got ${value}.`);
      return value;
    }
    case 'boolean': {
      if (typeof raw === 'boolean') return raw;
      const text = String(raw).trim().toLowerCase();
      if (['1', 'true', 'yes', 'on'].includes(text)) return true;
      if (['0', 'false', 'no', 'off'].includes(text)) return false;
      throw new ConfigError(`${where} must be true or false; got "${String(raw)}".`);
    }
    case 'list': {
      const values = (Array.isArray(raw) ? raw.map(String) : String(raw).split(','))
        .map((s) => s.trim())
        .filter((s) => s.length > 0);
      const unknown = spec.choices ? values.filter((value) => !spec.choices!.includes(value)) : [];
      if (unknown.length > 0)
        throw new ConfigError(`${where} takes ${spec.choices!.join(', ')}; got "${unknown.join(', ')}".`);
      if (spec.choices && values.length === 0)
        throw new ConfigError(`${where} must name at least one of ${spec.choices.join(', ')}.`);
      return values;
    }
  }
}

function readKeysFile(path: string): string[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError(`apiKeysFile: can not read ${path}: ${(error as Error).message}`);
  }
  return text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'));
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
  const fileKeys = config.apiKeysFile ? readKeysFile(config.apiKeysFile) : [];
  config.keys = [...new Set([...config.apiKeys, ...fileKeys, ...config.adminKeys, ...config.indexWriteKeys])];
  const keepAliveMs = parseKeepAlive(config.keepAlive);
  if (keepAliveMs === undefined) {
    throw new ConfigError(
      `keepAlive (${settings.keepAlive.env}) must be ${KEEP_ALIVE_SYNTAX}; got "${config.keepAlive}".`,
    );
  }
  config.keepAliveMs = keepAliveMs;
  // truncate false, the older setting, refuses long embedding inputs unless longInputs says otherwise.
  config.longInputs ??= config.truncate ? 'truncate' : 'refuse';
  const notPullable = config.pullAllow.filter((entry) => entry !== '*' && !isRepoId(entry) && !isRepoId(`${entry}/x`));
  if (notPullable.length > 0) {
    throw new ConfigError(
      `pullAllow (${settings.pullAllow.env}) takes *, Hub repository ids (owner/name) and owners; got "${notPullable.join(', ')}".`,
    );
  }
  config.device = checked('device', () => parseDevice(config.device));
  config.imageDevice = checked('imageDevice', () => parseDevice(config.imageDevice));
  config.devices = checked('deviceMap', () => parseDeviceMap(config.deviceMap));
  config.workers ??= Math.max(1, Math.floor(cores / config.intraOpThreads));
  config.soloThreads ??= config.workers * config.intraOpThreads;
  config.imageModelsDir ??= config.modelsDir;
  config.imageIntraOpThreads ??= Math.max(1, Math.floor(cores / 2));
  config.host ??= config.keys.length > 0 ? '0.0.0.0' : '127.0.0.1';
  if (config.keys.length === 0 && !isLoopback(config.host)) {
    throw new ConfigError(
      `No API keys are configured, so the server only listens on loopback; host "${config.host}" is not. Set ONNX_GATEWAY_API_KEYS or ONNX_GATEWAY_API_KEYS_FILE.`,
    );
  }
  const notOrigin = config.corsOrigins.find((origin) => !isOrigin(origin));
  if (notOrigin !== undefined)
    throw new ConfigError(`corsOrigins: "${notOrigin}" is not a web origin (scheme://host[:port], nothing after it).`);
  if (config.searchProvider === 'searxng' && !/^https?:\/\/[^/\s]+/.test(config.searxngUrl ?? '')) {
    throw new ConfigError(
      `searchProvider is "searxng", so searxngUrl (ONNX_GATEWAY_SEARXNG_URL) must be the instance's http(s) URL; got "${config.searxngUrl ?? ''}".`,
    );
  }
  // The search image model is served whether or not models names it.
  if (config.searchImageModel && !config.models.includes(config.searchImageModel))
    config.models = [...config.models, config.searchImageModel];
  if (config.cacheShared && !config.redisUrl) {
    throw new ConfigError(
      'cacheShared (ONNX_GATEWAY_CACHE_SHARED) shares the embedding cache through Redis: set redisUrl (ONNX_GATEWAY_REDIS_URL) too.',
    );
  }
  return config;
}

/** A setting's value read by `parse`, whose refusal becomes the config error that names the setting. */
function checked<T>(name: SettingName, parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    if (error instanceof DeviceNameError) throw new ConfigError(`${name} (${settings[name].env}): ${error.message}`);
    throw error;
  }
}

/** The config file: a JSON object of settings by name. A key that is no setting stops the start. */
function readConfigFile(path: string): RawConfig {
  let values: unknown;
  try {
    values = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new ConfigError(`ONNX_GATEWAY_CONFIG: can not read ${path}: ${(error as Error).message}`);
  }
  if (typeof values !== 'object' || values === null || Array.isArray(values)) {
    throw new ConfigError(`ONNX_GATEWAY_CONFIG: ${path} must hold a JSON object of settings by name.`);
  }
  const unknown = Object.keys(values).find((key) => !Object.hasOwn(settings, key));
  if (unknown !== undefined) {
    const near = nearest(unknown, Object.keys(settings));
    throw new ConfigError(
      `ONNX_GATEWAY_CONFIG: ${path} sets "${unknown}", which is not a setting${near ? `; did you mean ${near}?` : ' (docs/configuration.md lists them).'}`,
    );
  }
  return values;
}

const prefix = 'ONNX_GATEWAY_';
/** Variables of ours that are no setting: the config file, and the bench's own (its server's key, its python). */
const otherVariables = ['ONNX_GATEWAY_CONFIG', 'ONNX_GATEWAY_API_KEY', 'ONNX_GATEWAY_PYTHON'];

/**
 * One warning for each `ONNX_GATEWAY_*` variable in `env` that nothing reads, naming it and the
 * nearest setting's variable: a mistyped name would otherwise leave its setting at the default.
 */
export function unknownVariables(env: NodeJS.ProcessEnv = process.env): string[] {
  const known = [...Object.values(settings).map((spec) => spec.env), ...otherVariables];
  return Object.keys(env)
    .filter((name) => name.startsWith(prefix) && !known.includes(name))
    .map((name) => {
      const near = nearest(name, known);
      return `${name} is not a setting and is ignored${near ? `; did you mean ${near}?` : ' (docs/configuration.md lists them)'}`;
    });
}

/** The candidate nearest to `name` (edit distance, any case), if it is near enough to be a typo of it. */
function nearest(name: string, candidates: string[]): string | undefined {
  let best: { candidate: string; distance: number } | undefined;
  for (const candidate of candidates) {
    const distance = editDistance(name.toLowerCase(), candidate.toLowerCase());
    if (!best || distance < best.distance) best = { candidate, distance };
  }
  const bare = name.startsWith(prefix) ? name.length - prefix.length : name.length;
  return best && best.distance <= Math.max(2, Math.floor(bare / 4)) ? best.candidate : undefined;
}

/** Levenshtein distance: insertions, deletions and substitutions. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++)
      row[j] = Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    previous = row;
  }
  return previous[b.length]!;
}

function isOrigin(text: string): boolean {
  try {
    const url = new URL(text);
    return (
      (url.protocol === 'http:' || url.protocol === 'https:') && url.origin === text.toLowerCase().replace(/\/$/, '')
    );
  } catch {
    return false;
  }
}

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.');
}

/** The configuration table of docs/configuration.md, generated from the declarations above. */
export function configTable(): string {
  const rows = [
    '| setting | environment | flag | default | unit | description |',
    '| --- | --- | --- | --- | --- | --- |',
  ];
  for (const [name, spec] of Object.entries(settings) as [SettingName, Setting][]) {
    const value =
      spec.defaultText ??
      (Array.isArray(spec.default) ? spec.default.join(',') || '(none)' : String(spec.default ?? '(none)'));
    rows.push(`| ${name} | \`${spec.env}\` | \`${spec.flag}\` | ${value} | ${spec.unit ?? ''} | ${spec.description} |`);
  }
  return rows.join('\n');
}
