/**
 * Cohere's v2 rerank and embed, POST /v2/rerank and POST /v2/embed, as the `cohere-ai` SDK's v2
 * client calls them. (Cohere's v1 rerank shape, which Jina's clients speak too, is POST
 * /v1/rerank.) Errors keep the catalogue's shape: the SDK puts the whole body in its error.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { randomUUID } from 'node:crypto';
import { Type, type Static } from 'typebox';
import { embed, type EmbedRequest } from '../../core/embeddings.js';
import { precisions, quantizeEmbeddings } from '../../core/quantized-embeddings.js';
import { rerank } from '../../core/rerank.js';
import { invalid } from '../../errors.js';
import { reportCacheHits } from '../cache-hits.js';
import { vectorsJson } from '../embeddings.js';
import { sendJsonText } from '../json-text.js';
import { errorResponses, instructionField, LiteralUnion, responseHeaders, withHeaders } from '../schemas.js';
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
    texts: Type.Optional(Type.Array(Type.String(), { description: 'The texts to embed (this or inputs).' })),
    inputs: Type.Optional(
      Type.Array(
        Type.Object(
          {
            content: Type.Array(
              Type.Object(
                {
                  type: Type.String({ description: '"text" (images are not supported)' }),
                  text: Type.Optional(Type.String()),
                },
                { additionalProperties: true },
              ),
            ),
          },
          { additionalProperties: true },
        ),
        { description: "Inputs of content parts; an input's text parts are read together as one text." },
      ),
    ),
    images: Type.Optional(Type.Array(Type.String(), { description: 'Not supported: a 400.' })),
    input_type: Type.Optional(
      LiteralUnion(['search_document', 'search_query', 'classification', 'clustering', 'image'], {
        description:
          "search_query / search_document: the model's query or document prompt; classification / clustering: the model's prompt of that name, if it has one; image: not supported.",
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
        description: 'END (default) cuts the end of a long input, START its start; NONE makes it a 400.',
      }),
    ),
    output_dimension: Type.Optional(
      Type.Integer({ minimum: 1, description: 'Keep the first N components, renormalised (Matryoshka).' }),
    ),
    max_tokens: Type.Optional(
      Type.Integer({ minimum: 1, description: "Accepted at or above the model's window; a smaller value is a 400." }),
    ),
    priority: Type.Optional(Type.Integer({ description: 'Accepted and ignored.' })),
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
  texts: Type.Optional(Type.Array(Type.String())),
  meta: Type.Object({
    api_version: Type.Object({ version: Type.String() }),
    billed_units: Type.Object({ input_tokens: Type.Integer() }),
  }),
});

/** The texts of a v2 embed request: `texts`, or each input's text parts read together. */
function textsOf(body: V2EmbedBody): string[] {
  if (body.images !== undefined || body.input_type === 'image')
    throw invalid(body.images ? 'images' : 'input_type', 'Images are not embedded here; send texts.');
  if (body.texts !== undefined && body.inputs !== undefined) throw invalid('inputs', 'Send texts or inputs, not both.');
  if (body.texts !== undefined) return body.texts;
  if (body.inputs === undefined) throw invalid('texts', 'texts is required (or inputs).');
  return body.inputs.map((input, i) =>
    input.content
      .map((part, j) => {
        if (part.type !== 'text')
          throw invalid(
            `inputs[${i}].content[${j}]`,
            `inputs[${i}].content[${j}] is of type "${part.type}"; only text is embedded here.`,
          );
        if (typeof part.text !== 'string')
          throw invalid(`inputs[${i}].content[${j}].text`, `inputs[${i}].content[${j}] has no text.`);
        return part.text;
      })
      .join('\n'),
  );
}

export const cohereRoutes: FastifyPluginAsyncTypebox<HttpServices> = async (app, { core }) => {
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
        },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const texts = textsOf(body);
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
      const embedRequest: EmbedRequest = {
        model: model.id,
        input: texts,
        dimensions: body.output_dimension,
        inputType,
        truncate: body.truncate !== 'NONE',
        truncationDirection: body.truncate === 'START' ? 'left' : 'right',
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
      const meta = { api_version: { version: '2' }, billed_units: { input_tokens: result.promptTokens } };
      const head = `"id":${JSON.stringify(randomUUID())},"response_type":"embeddings_by_type"`;
      return sendJsonText(
        reply,
        `{${head},"embeddings":{${embeddings.join(',')}},"texts":${JSON.stringify(texts)},"meta":${JSON.stringify(meta)}}`,
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
