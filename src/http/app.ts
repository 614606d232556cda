/**
 * The fastify application: plugins, auth, error mapping and one plugin per route group.
 * Knows HTTP; everything else comes in through HttpServices.
 */
import { randomUUID } from 'node:crypto';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyPluginCallback } from 'fastify';
import { ApiError } from '../errors.js';
import { clientSignal } from './client-signal.js';
import { version } from '../version.js';
import { apiKeyAuth } from './auth.js';
import { batchRoutes } from './batches.js';
import { classifyRoutes } from './classify.js';
import { compatRoutes } from './compat/index.js';
import { embeddingsRoutes } from './embeddings.js';
import { hostGuard } from './host-guard.js';
import { imagesRoutes } from './images.js';
import { parseJsonBodies } from './json-body.js';
import { frameworkErrors, registerErrorHandling } from './errors.js';
import { requestLoggerFactory } from './request-logger.js';
import { responseHeaders, withHeaders } from './schemas.js';
import { modelsRoutes } from './models.js';
import { moderationsRoutes } from './moderations.js';
import { playgroundRoutes } from './playground.js';
import { readerRoutes } from './reader.js';
import { rerankRoutes } from './rerank.js';
import { searchRoutes } from './search.js';
import type { HttpServices } from './services.js';
import { unsupportedRoutes } from './unsupported.js';

export interface AppOptions {
  /** The process's pino logger (main.ts makes it before anything starts); none logs nothing. */
  logger?: FastifyBaseLogger;
  /** With tracing on, the plugin that makes request spans (tracing/sdk.ts): registered before every route. */
  tracing?: FastifyPluginCallback;
}

export async function buildApp(services: HttpServices, options: AppOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: options.logger,
    // The request's pino child is made only when the request logs something (http/request-logger.ts).
    ...(options.logger ? { childLoggerFactory: requestLoggerFactory } : {}),
    bodyLimit: services.config.bodyLimit,
    requestIdHeader: 'x-request-id',
    genReqId: () => randomUUID(),
    // Requests that arrive while draining get the catalogue's `shutting_down` (hook below).
    return503OnClosing: false,
    frameworkErrors,
    ajv: {
      // Validate strictly: no type coercion, keep unknown fields (clients send extras).
      customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: true, allErrors: false },
    },
  });

  if (options.tracing) await app.register(options.tracing);
  registerErrorHandling(app);
  await app.register(hostGuard, {
    keys: services.config.keys,
    allowedHosts: services.config.allowedHosts,
    corsOrigins: services.config.corsOrigins,
  });
  await app.register(clientSignal, { timeoutMs: services.config.requestTimeout * 1000 });
  // From the start of close() (SIGTERM), new requests on open connections are refused, /health
  // included, so a load balancer moves on; requests already in flight finish, and their
  // keep-alive connections close after the response so the server can finish closing.
  let draining = false;
  app.addHook('preClose', async () => {
    draining = true;
  });
  // Hooks on every request are callback-style: an async hook costs a promise and a microtask each.
  app.addHook('onRequest', (_request, _reply, done) => {
    done(draining ? new ApiError('shutting_down') : undefined);
  });
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.id);
    if (draining) reply.header('connection', 'close');
    done(null, payload);
  });
  // What each route reports of its time (http/timing.ts): the Server-Timing header and the metrics' phases.
  app.decorateRequest('timings', null);
  services.metrics?.register(app);
  // Bodies carry users' texts: they are logged only when asked for, to debug a client.
  if (services.config.logBodies) {
    app.addHook('preHandler', async (request) => {
      if (request.body !== undefined) request.log.info({ body: request.body }, 'request body');
    });
  }
  // The API speaks JSON only: plain text bodies get 415 instead of a confusing validation error.
  app.removeContentTypeParser('text/plain');
  // An empty JSON body is no options where a route's body is optional (http/json-body.ts).
  parseJsonBodies(app);
  // Any route can fail with a bug: document its 500 in the route's own error shape (that of its 400).
  // Every answer carries x-request-id (onSend above): document it on every success.
  app.addHook('onRoute', (route) => {
    const responses = route.schema?.response as Record<string, object> | undefined;
    if (!responses) return;
    const documented: Record<string, object> = { ...responses };
    if (responses['400'] && !responses['500']) documented['500'] = responses['400'];
    for (const status of Object.keys(responses))
      if (status.startsWith('2')) documented[status] = withHeaders(responses[status]!, responseHeaders.requestId);
    route.schema = { ...route.schema, response: documented };
  });
  // The OpenAPI document is generated from the route schemas, so it can not drift from them.
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'onnx-gateway',
        version,
        description: 'OpenAI-compatible embeddings, rerank, classification and moderation on local ONNX models.',
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: services.config.keys.length > 0 ? [{ bearer: [] }] : [],
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  app.get('/health', { schema: { hide: true } }, async (_request, reply) => {
    const ready = services.isReady();
    return reply
      .code(ready ? 200 : 503)
      .send({ status: ready ? 'ok' : 'loading', models: services.registry.list().map((m) => m.id) });
  });

  await app.register(playgroundRoutes);

  await app.register(async (api) => {
    await api.register(apiKeyAuth, {
      keys: services.config.keys,
      adminKeys: services.config.adminKeys,
      indexWriteKeys: services.config.indexWriteKeys,
    });
    // Model routes wait for warm workers rather than queueing behind a start that may fail.
    api.addHook('preHandler', (request, _reply, done) => {
      done(
        request.method === 'POST' && !services.isReady()
          ? new ApiError('not_ready', undefined, { retryAfterSeconds: 5 })
          : undefined,
      );
    });
    await api.register(embeddingsRoutes, services);
    await api.register(rerankRoutes, services);
    await api.register(classifyRoutes, services);
    await api.register(moderationsRoutes, services);
    await api.register(modelsRoutes, services);
    await api.register(compatRoutes, services);
    await api.register(searchRoutes, services);
    await api.register(readerRoutes, services);
    await api.register(imagesRoutes, services);
    await api.register(batchRoutes, services);
    await api.register(unsupportedRoutes);
  });

  return app;
}
