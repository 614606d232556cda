/**
 * Ollama's embedding routes, as the `ollama` client calls them: POST /api/embed, the older
 * POST /api/embeddings, GET /api/tags (the served embedding models), GET /api/ps (those loaded)
 * and POST /api/pull (ollama-pull.ts). Ollama names carry a tag;
 * `name:latest` is the served model `name`. Errors keep the catalogue's statuses and take
 * Ollama's body, `{error}`.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { embed } from '../../core/embeddings.js';
import { keepAliveOf } from '../../duration.js';
import { ApiError } from '../../errors.js';
import type { ServedModel } from '../../models/registry.js';
import { float32ToJson } from '../../vectors/encoding.js';
import { reportCacheHits } from '../cache-hits.js';
import { errorHandler, type ErrorRenderer } from '../errors.js';
import { sendJsonText } from '../json-text.js';
import { keepAliveSchema, responseHeaders, withHeaders } from '../schemas.js';
import { longInputsFields } from '../long-inputs.js';
import type { HttpServices } from '../services.js';
import { operationPhases, reportTimings } from '../timing.js';
import { errorResponsesOf } from './errors.js';
import { formatParameters } from './model-facts.js';
import { ollamaPullRoutes } from './ollama-pull.js';
import { vectorsToJson } from './vectors.js';

const tags = ['Ollama compatibility'];

const OllamaError = Type.Object(
  { error: Type.String(), code: Type.Optional(Type.String({ description: "The error catalogue's stable code" })) },
  { description: "Ollama's error shape, with the catalogue's status and code." },
);
const errorResponses = errorResponsesOf(OllamaError);
const ollamaError: ErrorRenderer = (error) => ({ error: error.message, code: error.code });

const EmbedBody = Type.Object(
  {
    model: Type.String({ description: 'A served embedding model id; `id:latest` names it too (GET /api/tags).' }),
    input: Type.Union([Type.String(), Type.Array(Type.String())]),
    truncate: Type.Optional(
      Type.Boolean({
        description: "Cut inputs longer than the model's window (absent: the server's truncate setting).",
      }),
    ),
    dimensions: Type.Optional(
      Type.Integer({
        minimum: 0,
        description: 'Keep the first N components, renormalised (the Matryoshka cut, as the model card computes it).',
      }),
    ),
    keep_alive: Type.Optional(keepAliveSchema),
    options: Type.Optional(Type.Object({}, { additionalProperties: true, description: 'Accepted and ignored.' })),
    ...longInputsFields,
  },
  { additionalProperties: true },
);

const EmbeddingsBody = Type.Object(
  {
    model: Type.String(),
    prompt: Type.String(),
    keep_alive: Type.Optional(keepAliveSchema),
    options: Type.Optional(Type.Object({}, { additionalProperties: true, description: 'Accepted and ignored.' })),
  },
  { additionalProperties: true },
);

const EmbedResponse = Type.Object({
  model: Type.String(),
  embeddings: Type.Array(Type.Array(Type.Number())),
  total_duration: Type.Integer({ description: 'ns' }),
  load_duration: Type.Integer({
    description: 'ns the request waited for its model to load; 0 when the model was loaded already.',
  }),
  prompt_eval_count: Type.Integer({ description: 'Tokens fed to the model, special tokens included.' }),
});

const ModelDetails = Type.Object({
  parent_model: Type.String(),
  format: Type.String(),
  family: Type.String(),
  families: Type.Array(Type.String()),
  parameter_size: Type.String({ description: 'Estimated from the file size' }),
  quantization_level: Type.String(),
});

const TagsResponse = Type.Object({
  models: Type.Array(
    Type.Object({
      name: Type.String(),
      model: Type.String(),
      modified_at: Type.String(),
      size: Type.Integer({ description: 'Bytes of the ONNX file' }),
      digest: Type.String(),
      details: ModelDetails,
    }),
  ),
});

const PsResponse = Type.Object({
  models: Type.Array(
    Type.Object({
      name: Type.String(),
      model: Type.String(),
      size: Type.Integer({ description: 'Resident bytes the loaded model holds' }),
      digest: Type.String(),
      details: ModelDetails,
      expires_at: Type.String({
        description: 'When the idle model unloads (keep-alive); far ahead when it never does, or while it is in use',
      }),
      size_vram: Type.Integer({
        description: 'Bytes held on an accelerator: the resident size of a model on a GPU, 0 on the CPU',
      }),
    }),
  ),
});

/** Go's longest duration (about 292 years): Ollama's expiry of a model kept for ever. */
const foreverMs = 9_223_372_036_854;

/** Ollama names always carry a tag; ours only for a variant (`id:int8`). */
const ollamaName = (model: ServedModel) => (model.id.includes(':') ? model.id : `${model.id}:latest`);

export const ollamaRoutes: FastifyPluginAsyncTypebox<HttpServices> = async (app, services) => {
  const { core, registry } = services;
  app.setErrorHandler(errorHandler(ollamaError));
  await app.register(ollamaPullRoutes, services);

  /** The served id an Ollama name means: the name itself, or without its `:latest` tag. */
  const servedId = (name: string) => {
    if (name.endsWith(':latest') && !registry.list().some((m) => m.id === name))
      return name.slice(0, -':latest'.length);
    return name;
  };

  app.post(
    '/api/embed',
    {
      schema: {
        tags,
        summary: 'Embed (Ollama)',
        body: EmbedBody,
        response: {
          200: withHeaders(EmbedResponse, responseHeaders.timing, responseHeaders.cacheHits),
          ...errorResponses,
        },
      },
    },
    async (request, reply) => {
      const started = performance.now();
      const { model, input, truncate, dimensions, keep_alive } = request.body;
      const keepAliveMs = keepAliveOf(keep_alive);
      const { long_inputs: longInputs, late_chunking: lateChunking } = request.body;
      const result = await embed(
        core,
        { model: servedId(model), input, truncate, dimensions, keepAliveMs, longInputs, lateChunking },
        request.clientSignal,
      );
      reportTimings(reply, operationPhases(result.timings));
      reportCacheHits(reply, result);
      const totalNs = Math.round((performance.now() - started) * 1e6);
      const loadNs = Math.round(result.timings.loadMs * 1e6);
      const payload = `{"model":${JSON.stringify(model)},"embeddings":${vectorsToJson(result)},"total_duration":${totalNs},"load_duration":${loadNs},"prompt_eval_count":${result.promptTokens}}`;
      return sendJsonText(reply, payload);
    },
  );

  app.post(
    '/api/embeddings',
    {
      schema: {
        tags,
        summary: 'Embed one prompt (Ollama, older route)',
        body: EmbeddingsBody,
        response: {
          200: withHeaders(
            Type.Object({ embedding: Type.Array(Type.Number()) }),
            responseHeaders.timing,
            responseHeaders.cacheHits,
          ),
          ...errorResponses,
        },
      },
    },
    async (request, reply) => {
      const { model, prompt, keep_alive } = request.body;
      const keepAliveMs = keepAliveOf(keep_alive);
      const result = await embed(core, { model: servedId(model), input: [prompt], keepAliveMs }, request.clientSignal);
      reportTimings(reply, operationPhases(result.timings));
      reportCacheHits(reply, result);
      return sendJsonText(reply, `{"embedding":${float32ToJson(result.vectors)}}`);
    },
  );

  /** What /api/tags and /api/ps tell of a served embedder. */
  const describe = (model: ServedModel) => {
    const facts = model.description;
    return {
      name: ollamaName(model),
      model: ollamaName(model),
      digest: facts.digest,
      details: {
        parent_model: '',
        format: 'onnx',
        family: facts.family,
        families: [facts.family],
        parameter_size: formatParameters(facts.parameters),
        quantization_level: model.variant === 'int8' ? 'INT8' : 'F32',
      },
    };
  };
  const embedders = () => registry.list().filter((m) => m.task === 'embedding');
  // Ollama's generation routes: a clear 501 rather than a 404 that looks like a wrong host.
  for (const path of ['/api/generate', '/api/chat']) {
    app.post(path, { schema: { hide: true } }, async () => {
      throw new ApiError(
        'unsupported_operation',
        `${path} is not supported by this server; it serves embeddings: /api/embed, /api/embeddings and /api/tags.`,
      );
    });
  }

  app.get(
    '/api/tags',
    {
      schema: {
        tags,
        summary: 'List the embedding models (Ollama)',
        response: { 200: TagsResponse, ...errorResponses },
      },
    },
    async () => ({
      models: embedders().map((model) => ({
        ...describe(model),
        modified_at: model.description.modifiedAt.toISOString(),
        size: model.description.size,
      })),
    }),
  );

  app.get(
    '/api/ps',
    {
      schema: {
        tags,
        summary: 'List the loaded embedding models (Ollama)',
        response: { 200: PsResponse, ...errorResponses },
      },
    },
    async () => ({
      models: embedders().flatMap((model) => {
        const state = core.lifecycle?.state(model.id) ?? { status: 'loaded' as const };
        if (state.status !== 'loaded') return [];
        const size = state.residentBytes ?? model.description.size;
        const device = state.placement?.device ?? 'cpu';
        const expiresAt = state.expiresAt ?? new Date(Date.now() + foreverMs);
        return [
          { ...describe(model), size, expires_at: expiresAt.toISOString(), size_vram: device === 'cpu' ? 0 : size },
        ];
      }),
    }),
  );
};
