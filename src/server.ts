/**
 * Composes a server from a configuration: registry -> engine -> core -> app. Used by main.ts and
 * by the end-to-end tests, so both run exactly the same wiring.
 */
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import type { Config } from './config.js';
import type { CoreContext } from './core/context.js';
import { Engine } from './engine/engine.js';
import { buildApp } from './http/app.js';
import { Catalogue } from './models/catalogue.js';
import { Registry } from './models/registry.js';

export interface Server {
  app: FastifyInstance;
  engine: Engine;
  registry: Registry;
  /** Resolves when every model is warm in every worker; rejects when a worker can not load one. */
  ready: Promise<void>;
  close(): Promise<void>;
}

export async function createServer(config: Config, logger: FastifyServerOptions['logger'] = false): Promise<Server> {
  const registry = await Registry.load(config.models, config.modelsDir, Catalogue.load());
  const engine = new Engine(config, registry.list());
  const ready = engine.ready.then((reports) => {
    // The warm-up run says how wide each embedder's vectors really are (a graph may project).
    for (const report of reports) {
      const model = registry.list().find((m) => m.id === report.id);
      if (model && model.task === 'embedding') model.dimensions = report.width;
    }
  });
  ready.catch(() => undefined);
  const core: CoreContext = { registry, scheduler: engine.scheduler, limits: config };
  const app = await buildApp({ config, core, registry, isReady: () => engine.isReady }, { logger });
  let closing: Promise<void> | undefined;
  return {
    app,
    engine,
    registry,
    ready,
    close() {
      closing ??= (async () => {
        await app.close();
        await engine.close();
      })();
      return closing;
    },
  };
}
