/**
 * GET /v1/models and GET /v1/models/{model}: OpenAI's list shape plus what each model does.
 */
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors.js';
import type { ServedModel } from '../models/registry.js';
import type { HttpServices } from './services.js';
import { errorResponses } from './schemas.js';

const Model = Type.Object({
  id: Type.String(),
  object: Type.Literal('model'),
  created: Type.Integer(),
  owned_by: Type.String(),
  task: Type.Union([Type.Literal('embedding'), Type.Literal('rerank')]),
  variant: Type.Union([Type.Literal('fp32'), Type.Literal('int8')]),
  dimensions: Type.Optional(Type.Integer()),
  max_tokens: Type.Integer(),
  ready: Type.Boolean(),
});

export async function modelsRoutes(app: FastifyInstance, { registry, isReady }: HttpServices): Promise<void> {
  const describe = (model: ServedModel) => ({
    id: model.id,
    object: 'model' as const,
    created: model.created,
    owned_by: model.ownedBy,
    task: model.task,
    variant: model.variant,
    ...(model.task === 'embedding' ? { dimensions: model.dimensions } : {}),
    max_tokens: model.maxTokens,
    ready: isReady(),
  });

  app.get('/v1/models', { schema: { tags: ['Models'], summary: 'List served models', response: { 200: Type.Object({ object: Type.Literal('list'), data: Type.Array(Model) }), ...errorResponses } } }, async () => ({
    object: 'list' as const,
    data: registry.list().map(describe),
  }));

  app.get<{ Params: { model: string } }>(
    '/v1/models/:model',
    { schema: { tags: ['Models'], summary: 'Retrieve a served model', params: Type.Object({ model: Type.String() }), response: { 200: Model, ...errorResponses } } },
    async (request) => {
      const model = registry.list().find((m) => m.id === request.params.model);
      if (!model) throw new ApiError('model_not_found', `The model "${request.params.model}" is not served here.`, { param: 'model' });
      return describe(model);
    },
  );
}
