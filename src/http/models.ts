/**
 * GET /v1/models and GET /v1/models/{model}: OpenAI's list shape plus what each model does: the
 * text models (embedding, rerank) and the image pipelines (super-resolution, background removal,
 * style transfer) that /v1/images/edits runs.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from 'typebox';
import { ApiError } from '../errors.js';
import { imageTasks, type ServedImageModel } from '../models/image-catalogue.js';
import { outputKinds } from '../models/heads.js';
import type { ServedModel } from '../models/registry.js';
import { VARIANTS } from '../models/variants.js';
import { keepAliveOf } from '../duration.js';
import { requireAdmin } from './auth.js';
import type { HttpServices } from './services.js';
import { errorResponses, keepAliveSchema, LiteralUnion } from './schemas.js';

type LoadStatus = 'loaded' | 'loading' | 'unloaded';

const Placement = Type.Object(
  {
    device: Type.String({ description: '`cpu`, or the accelerator the sessions run on.' }),
    sessions: Type.Integer({ description: 'Sessions that run batches side by side, each in a worker thread.' }),
    threads_per_session: Type.Integer({ description: 'ONNX Runtime intra-op threads of each session.' }),
    solo_threads: Type.Integer({
      description:
        'Intra-op threads of the solo session, which runs a batch that is alone on the server; 0 when there is none.',
    }),
    resident_bytes: Type.Optional(
      Type.Integer({
        description: 'Text models: resident memory the sessions added to the process when the model loaded.',
      }),
    ),
  },
  {
    description:
      "How the model runs. A loaded text model: chosen at load from its measured size and the memory budget. An image pipeline: the image lane's threads, each holding a session of every pipeline.",
  },
);

const Model = Type.Object({
  id: Type.String(),
  object: Type.Literal('model'),
  created: Type.Integer(),
  owned_by: Type.String(),
  task: LiteralUnion(['embedding', 'rerank', 'classify', ...imageTasks]),
  variant: Type.Optional(LiteralUnion(VARIANTS)),
  /** The Hub commit of a text model's files, when known. */
  revision: Type.Optional(Type.String()),
  dimensions: Type.Optional(Type.Integer()),
  /** Embedders: the kinds of vector they give (dense, sparse, tokens); a model with tokens and late interaction also reranks. */
  outputs: Type.Optional(Type.Array(LiteralUnion(outputKinds))),
  late_interaction: Type.Optional(Type.Boolean({ description: 'A ColBERT model: /v1/rerank scores by MaxSim.' })),
  max_tokens: Type.Optional(Type.Integer()),
  /** Classifiers: the labels, in the order of their scores. */
  labels: Type.Optional(Type.Array(Type.String())),
  /** Image pipelines: output edge / input edge of one pass. */
  scale: Type.Optional(Type.Integer()),
  ready: Type.Boolean(),
  status: Type.Optional(
    LiteralUnion(['loaded', 'loading', 'unloaded'], {
      description: 'Text models: whether the model is loaded (a request for an unloaded model loads it and waits).',
    }),
  ),
  placement: Type.Optional(Placement),
  vision: Type.Optional(
    Type.Object(
      {
        image_tokens: Type.Integer({ description: 'What one image counts for in usage: the vision sequence length.' }),
        status: LiteralUnion(['loaded', 'loading', 'unloaded']),
        placement: Type.Optional(Placement),
      },
      {
        description:
          "Image-text models: the vision tower, loaded when images come and placed in the memory budget beside the text tower (the model's own status and placement).",
      },
    ),
  ),
});

export const modelsRoutes: FastifyPluginAsyncTypebox<HttpServices> = async (
  app,
  { registry, isReady, images, core },
) => {
  const lifecycleOf = (model: ServedModel): { status?: LoadStatus; placement?: Static<typeof Placement> } => {
    const state = core.lifecycle?.state(model.id);
    if (!state) return {};
    const { placement, residentBytes } = state;
    return {
      status: state.status,
      ...(placement
        ? {
            placement: {
              device: placement.device,
              sessions: placement.sessions,
              threads_per_session: placement.threadsPerSession,
              solo_threads: placement.soloThreads,
              resident_bytes: residentBytes ?? 0,
            },
          }
        : {}),
    };
  };
  const describeText = (model: ServedModel) => ({
    id: model.id,
    object: 'model' as const,
    created: model.created,
    owned_by: model.ownedBy,
    task: model.task,
    variant: model.variant,
    ...(model.revision ? { revision: model.revision } : {}),
    ...(model.task === 'embedding' ? { dimensions: model.dimensions, outputs: model.heads.kinds } : {}),
    ...(model.lateInteraction ? { late_interaction: true } : {}),
    max_tokens: model.maxTokens,
    ...(model.task === 'classify' ? { labels: model.labels } : {}),
    ready: isReady(),
    ...lifecycleOf(model),
    ...(model.images
      ? {
          vision: {
            image_tokens: model.images.sequenceLength,
            status: 'unloaded' as LoadStatus,
            ...lifecycleOf(model.images.tower),
          },
        }
      : {}),
  });
  const describeImage = (model: ServedImageModel) => ({
    id: model.id,
    object: 'model' as const,
    created: model.created,
    owned_by: 'onnx-gateway',
    task: model.manifest.task,
    scale: model.manifest.scale,
    ready: isReady(),
    ...(images
      ? {
          placement: {
            device: images.context.lane.device,
            sessions: images.context.lane.threads,
            threads_per_session: images.context.lane.threadsPerSession,
            solo_threads: 0,
          },
        }
      : {}),
  });
  const all = () => [
    ...registry.list().map(describeText),
    ...(images?.context.pipelines.list() ?? []).map(describeImage),
  ];

  app.get(
    '/v1/models',
    {
      schema: {
        tags: ['Models'],
        summary: 'List served models',
        response: { 200: Type.Object({ object: Type.Literal('list'), data: Type.Array(Model) }), ...errorResponses },
      },
    },
    async () => ({
      object: 'list' as const,
      data: all(),
    }),
  );

  const retrieve = async (request: { params: { model?: string; owner?: string; name?: string } }) => {
    const { model, owner, name } = request.params;
    const id = model ?? `${owner}/${name}`;
    // A text model also answers to its aliases (a manifest's short id).
    const text = registry.list().find((m) => m.id === id || m.aliases.includes(id));
    const found = text ? describeText(text) : all().find((m) => m.id === id);
    if (!found) throw new ApiError('model_not_found', `The model "${id}" is not served here.`, { param: 'model' });
    return found;
  };
  const response = { 200: Model, ...errorResponses };
  app.get(
    '/v1/models/:model',
    {
      schema: {
        tags: ['Models'],
        summary: 'Retrieve a served model',
        params: Type.Object({ model: Type.String() }),
        response,
      },
    },
    retrieve,
  );
  // Hub repo ids ("owner/name") with their slash as it is.
  app.get(
    '/v1/models/:owner/:name',
    {
      schema: {
        tags: ['Models'],
        summary: 'Retrieve a served model by its Hub repo id',
        params: Type.Object({ owner: Type.String(), name: Type.String() }),
        response,
      },
    },
    retrieve,
  );

  // Admins load a text model ahead of its requests, or unload it to free its memory.
  const lifecycleAction =
    (action: 'load' | 'unload') =>
    async (request: {
      params: { model?: string; owner?: string; name?: string };
      body?: { keep_alive?: string | number } | null;
    }) => {
      const { model, owner, name } = request.params;
      const keepAliveMs = keepAliveOf(request.body?.keep_alive);
      const id = model ?? `${owner}/${name}`;
      const text = registry.list().find((m) => m.id === id || m.aliases.includes(id));
      if (!text)
        throw new ApiError('model_not_found', `The model "${id}" is not a text model served here.`, { param: 'model' });
      if (!core.lifecycle)
        throw new ApiError('unsupported_operation', 'This server loads every model at start and keeps it.');
      if (keepAliveMs !== undefined) core.lifecycle.keepAlive(text.id, keepAliveMs);
      await (action === 'load' ? core.lifecycle.load(text.id) : core.lifecycle.unload(text.id));
      return describeText(text);
    };
  const adminResponse = { 200: Model, ...errorResponses };
  for (const action of ['load', 'unload'] as const) {
    const summary = action === 'load' ? 'Load a text model (admin)' : 'Unload a text model (admin)';
    const description =
      action === 'load'
        ? 'Loads the model, placed in the memory budget, and answers once it serves (idle models unloaded first if needed; 503 insufficient_memory when none can be). Needs an admin key.'
        : 'Unloads the model once its running batches end, freeing its memory; a later request loads it again. Needs an admin key.';
    const body = Type.Union([Type.Object({ keep_alive: Type.Optional(keepAliveSchema) }), Type.Null()], {
      description: 'Optional. `keep_alive` sets how long the model stays loaded once idle (as on the Ollama routes).',
    });
    const schema = { tags: ['Models'], summary, description, body, response: adminResponse };
    app.post(
      `/v1/models/:model/${action}`,
      { onRequest: requireAdmin, schema: { ...schema, params: Type.Object({ model: Type.String() }) } },
      lifecycleAction(action),
    );
    app.post(
      `/v1/models/:owner/:name/${action}`,
      {
        onRequest: requireAdmin,
        schema: {
          ...schema,
          summary: `${summary} by its Hub repo id`,
          params: Type.Object({ owner: Type.String(), name: Type.String() }),
        },
      },
      lifecycleAction(action),
    );
  }
};
