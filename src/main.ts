/**
 * The composition root: how a server is put together and taken apart, in one place.
 *
 *   config -> registry -> engine lanes (text pool, image lane) -> core (embed, with the embedding
 *   cache, and rerank on the core context) -> images (on the image lane) and search (on core; the
 *   reader needs only the config) -> http app -> listen
 *
 * and the reverse on shutdown: stop accepting and drain requests, close search, then the lanes and the cache.
 * `onnx-gateway serve` (cli/serve.ts) runs serve(); the tests run createServer(), the same wiring
 * without signals or a port; `index add` and `bench` run startCore(), the models without HTTP.
 */
import type { FastifyInstance } from 'fastify';
import pino, { type DestinationStream, type Logger } from 'pino';
import { unknownVariables, type Config } from './config.js';
import { createEmbeddingCache } from './core/cache/embedding-cache.js';
import type { CoreContext } from './core/context.js';
import type { EditAdmission } from './images/admission.js';
import { imagesContext } from './images/service.js';
import type { Batches } from './batch/batches.js';
import { BatchService } from './batch/service.js';
import { SharedBatchService } from './batch/shared.js';
import { SearchService } from './search/service.js';
import { checkDevices } from './engine/devices.js';
import { Engine } from './engine/engine.js';
import { ImageLane } from './engine/image-pool.js';
import type { LifecycleObserver } from './engine/engine.js';
import type { BatchObserver } from './engine/scheduler.js';
import { buildApp } from './http/app.js';
import { batchEndpoints } from './http/batch-requests.js';
import { Metrics } from './http/metrics.js';
import { loadCatalogue } from './models/catalogue.js';
import { downloadConfiguredModels } from './models/download.js';
import { ImageRegistry } from './models/image-registry.js';
import { cutGraphsDir, loadServedModel, Registry, wantedDevices } from './models/registry.js';
import { parseVariant } from './models/variants.js';
import { startTracing, type Tracing } from './tracing/sdk.js';
import { traceLogFields } from './tracing/spans.js';
import { commandLineFlags, flagsNotGiven, setServerFlags } from './v8-flags.js';

export interface Server {
  app: FastifyInstance;
  engine: Engine;
  registry: Registry;
  /** Web search tasks and the local index. */
  search: SearchService;
  /** The files API and batches. */
  batch: Batches;
  /** The image lane: image edits' own workers. */
  images: ImageLane;
  /** How many image edits run at once and how many wait. */
  imageEdits: EditAdmission;
  /** Resolves when every model is warm in every worker; rejects when a worker can not load one. */
  ready: Promise<void>;
  close(): Promise<void>;
}

/** Tiles waiting for an image thread before the lane refuses more (edits keep few in flight each). */
const imageLaneQueueCapacity = 1024;

/** The text models and their engine without HTTP, for commands that run operations directly (`index add`, `bench`). */
export async function startCore(
  config: Config,
  observer: BatchObserver & LifecycleObserver = {},
  warn: (message: string) => void = (message) => process.stderr.write(`onnx-gateway: ${message}\n`),
): Promise<{ core: CoreContext; engine: Engine; registry: Registry; ready: Promise<void> }> {
  const catalogue = loadCatalogue(config.manifestsDir);
  // Where each text model runs: its configured device when this machine can use it (else the start
  // stops, or with the fallback the model runs on the CPU, said once per device).
  const wanted = wantedDevices(config.models, config.device, config.devices, catalogue);
  const { devices, warnings } = await checkDevices({ wanted, fallback: config.deviceFallback });
  warnings.forEach(warn);
  // The registry: every configured text model's files, checked and loaded (tokenizer, config).
  const registry = await Registry.load(
    config.models,
    config.modelsDir,
    catalogue,
    parseVariant(config.onnxVariant),
    devices,
    cutGraphsDir(config.dataDir),
  );
  // The text engine: a lane of sessions per model, placed in the memory budget, and the scheduler that batches into them.
  const engine = new Engine({ config, models: registry.list(), observer });
  const ready = engine.ready.then(() => undefined);
  ready.catch(() => undefined);
  // What embed and rerank run on.
  const core: CoreContext = { registry, scheduler: engine.scheduler, limits: config, lifecycle: engine };
  return { core, engine, registry, ready };
}

/**
 * The server over `config`. `logger` is the one logger of the process: fastify logs through it
 * (its requests' children) and so does every service, from the moment each opens.
 */
export async function createServer(
  config: Config,
  logger: Logger = pino({ enabled: false }),
  tracing?: Tracing,
): Promise<Server> {
  const metrics = new Metrics();
  // Image pipelines' files are checked before any worker starts, so a missing one stops the start cleanly.
  const pipelines = ImageRegistry.load(config.imageModels, config.imageModelsDir);
  // Warnings wait for the app's logger.
  const warnings: string[] = [];
  const imageDevice = await checkDevices({
    wanted: new Map(pipelines.list().length > 0 ? [['the image pipelines', config.imageDevice]] : []),
    fallback: config.deviceFallback,
  });
  warnings.push(...imageDevice.warnings);
  const {
    core: textCore,
    engine,
    registry,
    ready: textReady,
  } = await startCore(config, metrics, (warning) => warnings.push(warning));
  // The image lane: a pool of its own, so a long edit never takes a text worker.
  const imageLane = new ImageLane({
    device: imageDevice.devices.get('the image pipelines') ?? 'cpu',
    workers: config.imageWorkers,
    models: pipelines.list().map(({ id, onnxPath, input, output }) => ({ id, onnxPath, input, output })),
    session: {
      intraOpThreads: config.imageIntraOpThreads,
      spinning: config.ortSpinning,
      memoryArena: config.imageMemoryArena,
    },
    queueCapacity: imageLaneQueueCapacity,
  });
  const ready = Promise.all([textReady, imageLane.ready]).then(() => undefined);
  ready.catch(() => undefined);
  const isReady = () => engine.isReady && imageLane.isReady;
  metrics.watch({
    models: () => engine.models,
    queueDepth: (model) => engine.scheduler.depth(model),
    batchesInFlight: () => engine.scheduler.busy,
    workerRestarts: () => engine.restarts,
    ready: isReady,
    residentBytes: (model) => engine.state(model)?.residentBytes ?? 0,
  });

  // Core: the embedding cache under embed (rerank runs on `core` as it is); beside it images and search.
  const core: CoreContext = { ...textCore, embeddingCache: createEmbeddingCache(config, logger) };
  metrics.watchCache(core.embeddingCache);
  const images = imagesContext(config, pipelines, imageLane, registry);
  const closeLanes = async () => {
    images.admission.close();
    await engine.close();
    await imageLane.close();
    await core.embeddingCache?.close();
  };
  let search: SearchService;
  try {
    search = await SearchService.open(core, config, logger);
  } catch (error) {
    // E.g. Redis unreachable: stop the workers before the error ends the process.
    await closeLanes();
    throw error;
  }

  // Batches: their requests run through core as the routes' do; a start resumes the unfinished ones.
  let batch: Batches;
  try {
    // With Redis, replicas share batches: their records in Redis, their chunks in a BullMQ queue.
    batch = config.redisUrl
      ? await SharedBatchService.open(config.redisUrl, core, batchEndpoints(config), config, logger)
      : BatchService.open(core, batchEndpoints(config), config, logger);
  } catch (error) {
    await search.close();
    await closeLanes();
    throw error;
  }

  const replication = search.replication;
  if (replication) metrics.watchIndexReplication(() => replication.status());

  // HTTP: the routes over the core services.
  let app: FastifyInstance;
  try {
    // A model pulled over HTTP is served from then on, loaded on its first request.
    const onModelPulled = async (id: string) => {
      const model = await loadServedModel(
        id,
        config.modelsDir,
        loadCatalogue(config.manifestsDir),
        parseVariant(config.onnxVariant),
        'cpu',
        cutGraphsDir(config.dataDir),
      );
      registry.add(model);
      await engine.add(model);
    };
    app = await buildApp(
      {
        config,
        core,
        registry,
        isReady,
        search,
        batch,
        metrics,
        images: { context: images, bodyLimit: config.imageBodyLimit },
        onModelPulled,
      },
      { logger, tracing: tracing?.fastifyPlugin },
    );
    for (const warning of warnings) app.log.warn(warning);
  } catch (error) {
    // A route group refused the configuration: stop the workers first, or exiting mid-load aborts.
    await batch.close();
    await search.close();
    await closeLanes();
    throw error;
  }

  // Shutdown, the reverse: requests drain, then batches stop where they are, then search, then the lanes.
  let closing: Promise<void> | undefined;
  return {
    app,
    engine,
    registry,
    search,
    batch,
    images: imageLane,
    imageEdits: images.admission,
    ready,
    close() {
      closing ??= (async () => {
        await app.close();
        await batch.close();
        await search.close();
        await closeLanes();
      })();
      return closing;
    },
  };
}

/**
 * The process's logger, made before anything starts: JSON lines to `destination` (stdout in
 * blocks, below, unless told otherwise) at the configured level. With tracing on, each line
 * logged inside a span carries its `trace_id` and `span_id`.
 */
export function createLogger(
  config: Pick<Config, 'logLevel'>,
  destination: DestinationStream = logDestination(),
  traced = false,
): Logger {
  return pino({ ...loggerOptions(config), ...(traced ? { mixin: traceLogFields } : {}) }, destination);
}

/**
 * The server's pino options. Request logs carry no headers and no bodies (fastify logs method,
 * URL and status); credentials are redacted all the same in case a log call includes headers.
 */
function loggerOptions(config: Pick<Config, 'logLevel'>) {
  return {
    level: config.logLevel,
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers.cookie',
        'req.headers["x-api-key"]',
        'req.headers["api-key"]',
        'headers.authorization',
      ],
      censor: '[redacted]',
    },
  };
}

/**
 * stdout, written in blocks of 4 KB and at least every 250 ms: one write(2) per log line (two per
 * request) cost the event loop 0.3-0.5 ms each on a VM. pino flushes what is left on exit. The timer
 * flushes only after a write: sonic-boom's flush writes (an empty string) even with nothing held.
 */
function logDestination() {
  const destination = pino.destination({ dest: 1, sync: false, minLength: 4096 });
  const write = destination.write.bind(destination);
  let written = false;
  destination.write = (data: string) => {
    written = true;
    return write(data);
  };
  setInterval(() => {
    if (!written) return;
    written = false;
    destination.flush();
  }, 250).unref();
  return destination;
}

/**
 * `onnx-gateway serve`: fetches missing models, composes the server, listens, and stops cleanly on
 * SIGTERM/SIGINT: stop accepting, let in-flight requests finish (bounded), close the lanes.
 */
export async function serve(config: Config): Promise<void> {
  // Tracing first (when an OTLP endpoint is set), so that everything after it is traced.
  const tracing = await startTracing();
  const logger = createLogger(config, undefined, tracing !== undefined);
  if (tracing) logger.info('tracing: spans exported over OTLP (OTEL_* variables)');
  for (const warning of unknownVariables()) logger.warn(warning);
  setServerFlags();
  // Missing catalogue models are fetched before the registry looks for their files. Start-up
  // errors (errors.ts) go to the command, which says what they were and exits.
  if (config.download) await downloadConfiguredModels(config);
  const server = await createServer(config, logger, tracing);
  const { app } = server;
  if (config.keys.length === 0) {
    logger.warn(
      `NO API KEYS CONFIGURED: the API is open to anyone who can reach ${config.host}, so the server listens on loopback only. Set ONNX_GATEWAY_API_KEYS to serve beyond this machine.`,
    );
  }
  const missing = flagsNotGiven(commandLineFlags);
  if (missing.length > 0) {
    logger.info(
      `node was started without ${missing.join(' ')}: after each idle spell the request path runs unoptimised for a while (more CPU per request). npm start and the image pass it (docs/deployment.md: Starting node).`,
    );
  }
  server.ready.then(
    () =>
      logger.info({ models: server.registry.list().map((m) => m.id), workers: config.workers }, 'models warm: ready'),
    (error: Error) => {
      logger.fatal(`a worker could not load the models: ${error.message}`);
      process.exit(1);
    },
  );

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down: draining in-flight requests');
    const timer = setTimeout(() => {
      logger.error(`shutdown took longer than ${config.shutdownTimeout} ms: exiting`);
      process.exit(1);
    }, config.shutdownTimeout);
    timer.unref();
    // The spans of the last requests are exported before the process ends.
    server
      .close()
      .then(() => tracing?.shutdown())
      .then(
        () => process.exit(0),
        (error: Error) => {
          logger.error({ err: error }, 'error while shutting down');
          process.exit(1);
        },
      );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  await app.listen({ host: config.host, port: config.port });
}

export type { Config };
