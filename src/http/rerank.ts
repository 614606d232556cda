/**
 * POST /v1/rerank: the request and response shapes Cohere (v1) and Jina clients use.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from 'typebox';
import type { CoreContext } from '../core/context.js';
import { rerank } from '../core/rerank.js';
import type { HttpServices } from './services.js';
import { errorResponses, instructionField, responseHeaders, withHeaders } from './schemas.js';
import { operationPhases, reportTimings } from './timing.js';

const Document = Type.Union([Type.String(), Type.Object({ text: Type.String() }, { additionalProperties: true })]);

export const RerankBody = Type.Object(
  {
    query: Type.String(),
    documents: Type.Array(Document, { description: 'Texts, or objects with a `text` field.' }),
    model: Type.Optional(Type.String({ description: 'A served rerank model id. Absent: the first served reranker.' })),
    top_n: Type.Optional(Type.Integer({ minimum: 0, description: 'Absent or 0: all documents.' })),
    return_documents: Type.Optional(Type.Boolean({ default: false })),
    instruction: Type.Optional(instructionField),
  },
  { additionalProperties: true },
);

const RerankResponse = Type.Object({
  id: Type.String(),
  model: Type.String(),
  results: Type.Array(
    Type.Object({
      index: Type.Integer(),
      relevance_score: Type.Number({
        description: 'sigmoid of the model logit; for a late-interaction (ColBERT) model, the MaxSim sum',
      }),
      document: Type.Optional(Type.Object({ text: Type.String() })),
    }),
  ),
  meta: Type.Object({
    api_version: Type.Object({ version: Type.String() }),
    billed_units: Type.Object({ search_units: Type.Integer() }),
    tokens: Type.Object({ input_tokens: Type.Integer(), output_tokens: Type.Integer() }),
  }),
  usage: Type.Object({ total_tokens: Type.Integer(), prompt_tokens: Type.Integer() }),
});

/** What POST /v1/rerank answers for `body`; batches run their requests through it too. */
export async function rerankDocuments(core: CoreContext, body: Static<typeof RerankBody>, signal: AbortSignal) {
  const texts = body.documents.map((doc) => (typeof doc === 'string' ? doc : doc.text));
  const result = await rerank(
    core,
    { model: body.model, query: body.query, documents: texts, topN: body.top_n, instruction: body.instruction },
    signal,
  );
  const answer = {
    id: result.id,
    model: result.model,
    results: result.results.map(({ index, score }) => ({
      index,
      relevance_score: score,
      ...(body.return_documents ? { document: { text: texts[index]! } } : {}),
    })),
    meta: {
      api_version: { version: '1' },
      // Cohere bills a search unit per query with up to 100 documents.
      billed_units: { search_units: Math.ceil(texts.length / 100) },
      tokens: { input_tokens: result.totalTokens, output_tokens: 0 },
    },
    usage: { total_tokens: result.totalTokens, prompt_tokens: result.totalTokens },
  };
  return { result, answer };
}

export const rerankRoutes: FastifyPluginAsyncTypebox<HttpServices> = async (app, { core }) => {
  app.post(
    '/v1/rerank',
    {
      schema: {
        tags: ['Rerank'],
        summary: 'Rerank documents',
        body: RerankBody,
        response: { 200: withHeaders(RerankResponse, responseHeaders.timing), ...errorResponses },
      },
    },
    async (request, reply) => {
      const { result, answer } = await rerankDocuments(core, request.body, request.clientSignal);
      reportTimings(reply, operationPhases(result.timings));
      return answer;
    },
  );
};
