/**
 * The fastify application: plugins, auth, error mapping and one plugin per route group.
 * Knows HTTP; everything else comes in through HttpServices.
 */
import { randomUUID } from 'node:crypto';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { ApiError } from '../errors.js';
import { bearerAuth } from './auth.js';
import { embeddingsRoutes } from './embeddings.js';
import { registerErrorHandling } from './errors.js';
import { modelsRoutes } from './models.js';
import { rerankRoutes } from './rerank.js';
import type { HttpServices } from './services.js';
import { unsupportedRoutes } from './unsupported.js';

export interface AppOptions {
  /** pino logger options, or false for none (tests). */
  logger?: FastifyServerOptions['logger'];
}

export async function buildApp(services: HttpServices, options: AppOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    logger: options.logger ?? false,
    bodyLimit: services.config.bodyLimit,
    requestIdHeader: 'x-request-id',
    genReqId: () => randomUUID(),
    return503OnClosing: true,
    ajv: {
      // Validate strictly: no type coercion, keep unknown fields (clients send extras).
      customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: true, allErrors: false },
    },
  });

  registerErrorHandling(app);
  // The API speaks JSON only: plain text bodies get 415 instead of a confusing validation error.
  app.removeContentTypeParser('text/plain');
  // The OpenAPI document is generated from the route schemas, so it can not drift from them.
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'onnx-gateway', version: '0.1.0', description: 'OpenAI-compatible embeddings and rerank on local ONNX models.' },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: services.config.keys.length > 0 ? [{ bearer: [] }] : [],
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  app.get('/openapi.json', { schema: { hide: true } as never }, async () => app.swagger());
  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });

  app.get('/health', { schema: { hide: true } as never }, async (_request, reply) => {
    const ready = services.isReady();
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ok' : 'loading', models: services.registry.list().map((m) => m.id) });
  });

  await app.register(async (api) => {
    if (services.config.keys.length > 0) api.addHook('onRequest', bearerAuth(services.config.keys));
    // Model routes wait for warm workers rather than queueing behind a start that may fail.
    api.addHook('preHandler', async (request) => {
      if (request.method === 'POST' && !services.isReady()) throw new ApiError('not_ready', undefined, { headers: { 'retry-after': '5' } });
    });
    await api.register(embeddingsRoutes, services);
    await api.register(rerankRoutes, services);
    await api.register(modelsRoutes, services);
    await api.register(unsupportedRoutes);
  });

  return app;
}
