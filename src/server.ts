/**
 * Composes a server from a configuration: registry -> engine -> core -> app. Used by main.ts and
 * by the end-to-end tests, so both run exactly the same wiring.
 */
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import type { Config } from './config.js';
import type { CoreContext } from './core/context.js';
import { startImages } from './core/images/service.js';
import { SearchService } from './core/search/service.js';
import type { ImageLane } from './engine/image-pool.js';
import { Engine } from './engine/engine.js';
import type { BatchObserver } from './engine/scheduler.js';
import { buildApp } from './http/app.js';
import { Metrics } from './http/metrics.js';
import { loadCatalogue } from './models/catalogue.js';
import { ImageRegistry } from './models/image-catalogue.js';
import { Registry } from './models/registry.js';

export interface Server {
  app: FastifyInstance;
  engine: Engine;
  registry: Registry;
  /** Web search tasks and the local index. */
  search: SearchService;
  /** The image lane: image edits' own workers. */
  images: ImageLane;
  /** Resolves when every model is warm in every worker; rejects when a worker can not load one. */
  ready: Promise<void>;
  close(): Promise<void>;
}

/** The models and the engine without HTTP, for commands that run operations directly (`index add`). */
export async function startCore(
  config: Config,
  observer: BatchObserver = {},
): Promise<{ core: CoreContext; engine: Engine; registry: Registry; ready: Promise<void> }> {
  const registry = await Registry.load(config.models, config.modelsDir, loadCatalogue(config.manifestsDir));
  const engine = new Engine(config, registry.list(), observer);
  const ready = engine.ready.then((reports) => {
    // The warm-up run says how wide each embedder's vectors really are (a graph may project).
    for (const report of reports) {
      const model = registry.list().find((m) => m.id === report.id);
      if (model && model.task === 'embedding') model.dimensions = report.width;
    }
  });
  ready.catch(() => undefined);
  const core: CoreContext = { registry, scheduler: engine.scheduler, limits: config };
  return { core, engine, registry, ready };
}

export async function createServer(config: Config, logger: FastifyServerOptions['logger'] = false): Promise<Server> {
  const metrics = new Metrics();
  // Image pipelines' files are checked before any worker starts, so a missing one stops the start cleanly.
  const pipelines = ImageRegistry.load(config.imageModels, config.imageModelsDir);
  const { core, engine, registry, ready: textReady } = await startCore(config, metrics);
  const images = startImages(config, pipelines, registry);
  const ready = Promise.all([textReady, images.lane.ready]).then(() => undefined);
  ready.catch(() => undefined);
  metrics.watch({
    models: registry.list().map((m) => m.id),
    queueDepth: (model) => engine.scheduler.depth(model),
    batchesInFlight: () => engine.scheduler.busy,
    workerRestarts: () => engine.pool.restarts,
    ready: () => engine.isReady && images.lane.isReady,
  });
  engine.ready.then((reports) => metrics.modelsLoaded(reports), () => undefined);
  let app: FastifyInstance | undefined;
  let search: SearchService;
  try {
    search = await SearchService.open(core, config, { error: (object, message) => app?.log.error(object, message) });
  } catch (error) {
    // E.g. Redis unreachable: stop the workers before the error ends the process.
    await engine.close();
    await images.lane.close();
    throw error;
  }
  try {
    app = await buildApp(
      { config, core, registry, isReady: () => engine.isReady && images.lane.isReady, search, metrics, images: { context: images.context, bodyLimit: config.imageBodyLimit } },
      { logger },
    );
  } catch (error) {
    // A route group refused the configuration: stop the workers first, or exiting mid-load aborts.
    await search.close();
    await engine.close();
    await images.lane.close();
    throw error;
  }
  let closing: Promise<void> | undefined;
  return {
    app,
    engine,
    registry,
    search,
    images: images.lane,
    ready,
    close() {
      closing ??= (async () => {
        await app.close();
        await search.close();
        await engine.close();
        await images.lane.close();
      })();
      return closing;
    },
  };
}
