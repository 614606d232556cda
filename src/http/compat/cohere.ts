/**
 * Cohere's v2 rerank and embed, POST /v2/rerank and POST /v2/embed, as the `cohere-ai` SDK's v2
 * client calls them. (Cohere's v1 rerank shape, which Jina's clients speak too, is POST
 * /v1/rerank.) Embed takes texts, images (data URIs) and inputs of content parts, read as the
 * OpenAI-shaped route reads them (embedding-inputs.ts). Errors keep the catalogue's shape: the
 * SDK puts the whole body in its error.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { randomUUID } from 'node:crypto';
import { Type, type Static } from 'typebox';
import { embed, type EmbedRequest } from '../../core/embeddings.js';
import { precisions, quantizeEmbeddings } from '../../core/quantized-embeddings.js';
import { rerank } from '../../core/rerank.js';
import { invalid } from '../../errors.js';
import { reportCacheHits } from '../cache-hits.js';
import { checkCount, ContentPart, readImageRef, readParts, resolveItems } from '../embedding-inputs.js';
import { imageSourceOptions, type ImageSourceOptions } from '../image-sources.js';
import { vectorsJson } from '../embeddings.js';
import { sendJsonText } from '../json-text.js';
import {
  ErrorResponse,
  errorResponses,
  instructionField,
  LiteralUnion,
  responseHeaders,
  withHeaders,
} from '../schemas.js';
import { longInputsFields } from '../long-inputs.js';
import type { HttpServices } from '../services.js';
import { operationPhases, reportTimings } from '../timing.js';

const V2RerankBody = Type.Object(
  {
    model: Type.Optional(Type.String({ description: 'A served rerank model id. Absent: the first served reranker.' })),
    query: Type.String(),
    documents: Type.Array(Type.String()),
    top_n: Type.Optional(Type.Integer({ minimum: 0, description: 'Absent or 0: all documents.' })),
    max_tokens_per_doc: Type.Optional(
      Type.Integer({
        minimum: 1,
        description:
          'Cut each document to this many tokens. Absent: a long document is split into windows and scores as its best one.',
      }),
    ),
    priority: Type.Optional(Type.Integer({ description: 'Accepted and ignored.' })),
    instruction: Type.Optional(instructionField),
  },
  { additionalProperties: true },
);

const V2RerankResponse = Type.Object({
  id: Type.String(),
  results: Type.Array(
    Type.Object({ index: Type.Integer(), relevance_score: Type.Number({ description: 'sigmoid of the model logit' }) }),
  ),
  meta: Type.Object({
    api_version: Type.Object({ version: Type.String() }),
    billed_units: Type.Object({ search_units: Type.Integer() }),
  }),
});

const embeddingTypes = ['float', ...precisions, 'base64'] as const;
type EmbeddingType = (typeof embeddingTypes)[number];

const V2EmbedBody = Type.Object(
  {
    model: Type.String({ description: 'A served embedding model id.' }),
    texts: Type.Optional(Type.Array(Type.String(), { description: 'The texts to embed (this, images or inputs).' })),
    inputs: Type.Optional(
      Type.Array(Type.Object({ content: Type.Array(ContentPart) }, { additionalProperties: true }), {
        description:
          "Inputs of content parts, a vector each: an input's text parts are read together as one text (joined by newlines), a lone image part is that image, and text and images together are one fused input, which models that can not fuse them refuse (400).",
      }),
    ),
    images: Type.Optional(
      Type.Array(Type.String(), {
        description:
          'Images to embed, a vector each: data URIs (data:image/png;base64,...) of PNG, JPEG or WebP, or http(s) URLs where the server fetches them (ONNX_GATEWAY_IMAGE_URLS).',
      }),
    ),
    input_type: Type.Optional(
      LiteralUnion(['search_document', 'search_query', 'classification', 'clustering', 'image'], {
        description:
          "search_query / search_document: the model's query or document prompt; classification / clustering: the model's prompt of that name, if it has one; image: no prompt (images take none).",
      }),
    ),
    embedding_types: Type.Optional(
      Type.Array(LiteralUnion(embeddingTypes), {
        minItems: 1,
        description:
          'Absent: float. int8 / uint8: each dimension on 256 levels over its range on the shipped calibration text; binary / ubinary: a sign bit per dimension, packed 8 to a byte (binary: the byte minus 128); base64: the float32 bytes.',
      }),
    ),
    truncate: Type.Optional(
      LiteralUnion(['NONE', 'START', 'END'], {
        description:
          "END cuts the end of a long input, START its start; NONE makes it a 400. Absent: the server's longInputs setting (END's cut by default).",
      }),
    ),
    output_dimension: Type.Optional(
      Type.Integer({
        minimum: 1,
        description: 'Keep the first N components, renormalised (the Matryoshka cut, as the model card computes it).',
      }),
    ),
    max_tokens: Type.Optional(
      Type.Integer({ minimum: 1, description: "Accepted at or above the model's window; a smaller value is a 400." }),
    ),
    priority: Type.Optional(Type.Integer({ description: 'Accepted and ignored.' })),
    ...longInputsFields,
  },
  { additionalProperties: true },
);
type V2EmbedBody = Static<typeof V2EmbedBody>;

const V2EmbedResponse = Type.Object({
  id: Type.String(),
  response_type: Type.Literal('embeddings_by_type'),
  embeddings: Type.Object(
    Object.fromEntries(
      embeddingTypes.map((type) => [
        type,
        Type.Optional(type === 'base64' ? Type.Array(Type.String()) : Type.Array(Type.Array(Type.Number()))),
      ]),
    ),
    { description: 'One list per requested type, a vector per input.' },
  ),
  texts: Type.Optional(Type.Array(Type.String(), { description: 'The texts embedded, when every input was a text.' })),
  images: Type.Optional(
    Type.Array(
      Type.Object({ width: Type.Integer(), height: Type.Integer(), format: Type.String(), bit_depth: Type.Integer() }),
      { description: 'Each image embedded, in order, as its header describes it.' },
    ),
  ),
  meta: Type.Object({
    api_version: Type.Object({ version: Type.String() }),
    billed_units: Type.Object({
      input_tokens: Type.Integer({
        description:
          "Text tokens, and each image's vision sequence length (its patches, plus the class token where the model has one).",
      }),
      images: Type.Optional(Type.Integer({ description: 'Images embedded, when there were any.' })),
    }),
  }),
});

/** A v2 embed request's inputs: `texts`, `images` or `inputs` (exactly one), as core's items. */
function readInputs(body: V2EmbedBody, options: ImageSourceOptions & { maxInputs: number }, signal: AbortSignal) {
  const given = (['texts', 'images', 'inputs'] as const).filter((field) => body[field] !== undefined);
  if (given.length === 0) throw invalid('texts', 'texts is required (or images, or inputs).');
  if (given.length > 1) throw invalid(given[1]!, `Send one of texts, images and inputs; got ${given.join(' and ')}.`);
  const field = given[0]!;
  if (field === 'texts') return Promise.resolve({ input: body.texts!, images: [] });
  const values = field === 'images' ? body.images! : body.inputs!;
  if (values.length === 0) throw invalid(field, `${field} must not be an empty array.`);
  checkCount(values.length, options.maxInputs, field);
  const pending =
    field === 'images'
      ? body.images!.map((source, i) => readImageRef(source, `images[${i}]`))
      : body.inputs!.map((input, i) => readParts(input.content, `inputs[${i}].content`));
  return resolveItems(pending, options, signal);
}

export const cohereRoutes: FastifyPluginAsyncTypebox<HttpServices> = async (app, { core, config }) => {
  const imageOptions = { ...imageSourceOptions(config), maxInputs: config.maxInputs };
  app.post(
    '/v2/embed',
    {
      schema: {
        tags: ['Cohere compatibility'],
        summary: 'Embed texts (Cohere v2)',
        body: V2EmbedBody,
        response: {
          200: withHeaders(V2EmbedResponse, responseHeaders.timing, responseHeaders.cacheHits),
          ...errorResponses,
          // An image named by URL: its server failed, or did not answer in time.
          502: ErrorResponse,
          504: ErrorResponse,
        },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const model = core.registry.resolve(body.model, 'embedding');
      if (body.max_tokens !== undefined && body.max_tokens < model.maxTokens) {
        throw invalid(
          'max_tokens',
          `max_tokens below the model's window (${model.maxTokens} tokens) is not supported; inputs are cut at the window, as truncate says.`,
        );
      }
      // Cohere's types name the prompt kinds; classification and clustering use a prompt of that name where the model has one.
      const kind = body.input_type;
      const inputType =
        kind === 'search_query'
          ? 'query'
          : kind === 'search_document'
            ? 'document'
            : kind && Object.hasOwn(model.prompts, kind)
              ? kind
              : undefined;
      const { input, images: headers } = await readInputs(body, imageOptions, request.clientSignal);
      const embedRequest: EmbedRequest = {
        model: model.id,
        input,
        dimensions: body.output_dimension,
        inputType,
        // Absent: the server's default, which is END's unless the server is set otherwise.
        truncate: body.truncate === undefined ? undefined : body.truncate !== 'NONE',
        truncationDirection: body.truncate === 'START' ? 'left' : 'right',
        longInputs: body.long_inputs,
        lateChunking: body.late_chunking,
      };
      const result = await embed(core, embedRequest, request.clientSignal);
      reportTimings(reply, operationPhases(result.timings));
      reportCacheHits(reply, result);
      const types = [...new Set<EmbeddingType>(body.embedding_types ?? ['float'])];
      const embeddings: string[] = [];
      for (const type of types) {
        const format =
          type === 'float' || type === 'base64' ? type : await quantizeEmbeddings(core, embedRequest, result, type);
        embeddings.push(`${JSON.stringify(type)}:[${vectorsJson(result, format).join(',')}]`);
      }
      const billed = { input_tokens: result.promptTokens, ...(headers.length > 0 ? { images: headers.length } : {}) };
      const meta = { api_version: { version: '2' }, billed_units: billed };
      const head = `"id":${JSON.stringify(randomUUID())},"response_type":"embeddings_by_type"`;
      // Cohere answers the texts it embedded, and the images described.
      const textual = Array.isArray(input) && input.every((item) => typeof item === 'string');
      const texts = textual ? `,"texts":${JSON.stringify(input)}` : '';
      const described = headers.map(({ width, height, format, bitDepth }) => ({
        width,
        height,
        format,
        bit_depth: bitDepth,
      }));
      const imagesJson = headers.length > 0 ? `,"images":${JSON.stringify(described)}` : '';
      return sendJsonText(
        reply,
        `{${head},"embeddings":{${embeddings.join(',')}}${texts}${imagesJson},"meta":${JSON.stringify(meta)}}`,
      );
    },
  );

  app.post(
    '/v2/rerank',
    {
      schema: {
        tags: ['Cohere compatibility'],
        summary: 'Rerank documents (Cohere v2)',
        body: V2RerankBody,
        response: { 200: withHeaders(V2RerankResponse, responseHeaders.timing), ...errorResponses },
      },
    },
    async (request, reply) => {
      const { model, query, documents, top_n: topN, max_tokens_per_doc: maxTokensPerDoc, instruction } = request.body;
      const result = await rerank(
        core,
        { model, query, documents, topN, maxTokensPerDoc, instruction },
        request.clientSignal,
      );
      reportTimings(reply, operationPhases(result.timings));
      return {
        id: result.id,
        results: result.results.map(({ index, score }) => ({ index, relevance_score: score })),
        meta: {
          api_version: { version: '2' },
          // Cohere bills a search unit per query with up to 100 documents.
          billed_units: { search_units: Math.ceil(documents.length / 100) },
        },
      };
    },
  );
};
