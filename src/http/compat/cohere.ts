/**
 * Cohere's v2 rerank, POST /v2/rerank, as the `cohere-ai` SDK's v2 client calls it. (Cohere's v1
 * shape, which Jina's clients speak too, is POST /v1/rerank.) Errors keep the catalogue's shape:
 * the SDK puts the whole body in its error.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { rerank } from '../../core/rerank.js';
import { errorResponses, responseHeaders, withHeaders } from '../schemas.js';
import type { HttpServices } from '../services.js';
import { operationPhases, reportTimings } from '../timing.js';

const V2RerankBody = Type.Object(
  {
    model: Type.Optional(Type.String({ description: 'A served rerank model id. Absent: the first served reranker.' })),
    query: Type.String(),
    documents: Type.Array(Type.String()),
    top_n: Type.Optional(Type.Integer({ minimum: 0, description: 'Absent or 0: all documents.' })),
    max_tokens_per_doc: Type.Optional(
      Type.Integer({ minimum: 1, description: 'Cut each document to this many tokens. Absent: a long document is split into windows and scores as its best one.' }),
    ),
    priority: Type.Optional(Type.Integer({ description: 'Accepted and ignored.' })),
  },
  { additionalProperties: true },
);

const V2RerankResponse = Type.Object({
  id: Type.String(),
  results: Type.Array(Type.Object({ index: Type.Integer(), relevance_score: Type.Number({ description: 'sigmoid of the model logit' }) })),
  meta: Type.Object({
    api_version: Type.Object({ version: Type.String() }),
    billed_units: Type.Object({ search_units: Type.Integer() }),
  }),
});

export const cohereRoutes: FastifyPluginAsyncTypebox<HttpServices> = async (app, { core }) => {
  app.post(
    '/v2/rerank',
    { schema: { tags: ['Cohere compatibility'], summary: 'Rerank documents (Cohere v2)', body: V2RerankBody, response: { 200: withHeaders(V2RerankResponse, responseHeaders.timing), ...errorResponses } } },
    async (request, reply) => {
      const { model, query, documents, top_n: topN, max_tokens_per_doc: maxTokensPerDoc } = request.body;
      const result = await rerank(core, { model, query, documents, topN, maxTokensPerDoc }, request.clientSignal);
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
