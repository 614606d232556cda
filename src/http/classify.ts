/**
 * POST /v1/classify: sequence classification in vLLM's shape (`input` a text or texts; per input
 * the top label, the score of every label in `probs`, `num_classes`). `probs` are the model's
 * scores: softmax probabilities, or a sigmoid per label for a multi-label model, or the raw logits
 * of a regression head; `raw_scores` (Infinity's field) asks for the logits of any model.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from 'typebox';
import type { CoreContext } from '../core/context.js';
import { classify } from '../core/classify.js';
import type { HttpServices } from './services.js';
import { errorResponses, responseHeaders, withHeaders } from './schemas.js';
import { operationPhases, reportTimings } from './timing.js';

export const ClassifyBody = Type.Object(
  {
    input: Type.Union([Type.String(), Type.Array(Type.String())], { description: 'A text or texts to classify.' }),
    model: Type.Optional(
      Type.String({ description: 'A served classify model id. Absent: the first served classifier.' }),
    ),
    raw_scores: Type.Optional(
      Type.Boolean({ default: false, description: "The head's logits instead of its scores." }),
    ),
    truncate: Type.Optional(
      Type.Boolean({
        description: "Cut inputs longer than the model's window (absent: the server's truncate setting).",
      }),
    ),
    user: Type.Optional(Type.String()),
  },
  { additionalProperties: true },
);

const ClassifyResponse = Type.Object({
  id: Type.String(),
  object: Type.Literal('list'),
  created: Type.Integer(),
  model: Type.String(),
  data: Type.Array(
    Type.Object({
      index: Type.Integer(),
      label: Type.String({ description: 'The label with the highest score' }),
      probs: Type.Array(Type.Number(), { description: "Every label's score, in the model's label order (id2label)" }),
      num_classes: Type.Integer(),
    }),
  ),
  usage: Type.Object({
    prompt_tokens: Type.Integer(),
    total_tokens: Type.Integer(),
    completion_tokens: Type.Integer(),
    prompt_tokens_details: Type.Null(),
  }),
});

/** What POST /v1/classify answers for `body`; batches run their requests through it too. */
export async function classifyTexts(core: CoreContext, body: Static<typeof ClassifyBody>, signal: AbortSignal) {
  const inputs = typeof body.input === 'string' ? [body.input] : body.input;
  const result = await classify(core, { model: body.model, inputs, truncate: body.truncate }, signal);
  const width = result.labels.length;
  const values = body.raw_scores ? result.logits : result.scores;
  const answer = {
    id: `classify-${result.id.replace(/-/g, '')}`,
    object: 'list' as const,
    created: Math.floor(Date.now() / 1000),
    model: result.model,
    data: inputs.map((_, index) => {
      const row = Array.from(values.subarray(index * width, (index + 1) * width));
      let top = 0;
      for (let i = 1; i < width; i++) if (row[i]! > row[top]!) top = i;
      return { index, label: result.labels[top]!, probs: row, num_classes: width };
    }),
    usage: {
      prompt_tokens: result.promptTokens,
      total_tokens: result.promptTokens,
      completion_tokens: 0,
      prompt_tokens_details: null,
    },
  };
  return { result, answer };
}

export const classifyRoutes: FastifyPluginAsyncTypebox<HttpServices> = async (app, { core }) => {
  app.post(
    '/v1/classify',
    {
      schema: {
        tags: ['Classify'],
        summary: 'Classify texts',
        body: ClassifyBody,
        response: { 200: withHeaders(ClassifyResponse, responseHeaders.timing), ...errorResponses },
      },
    },
    async (request, reply) => {
      const { result, answer } = await classifyTexts(core, request.body, request.clientSignal);
      reportTimings(reply, operationPhases(result.timings));
      return answer;
    },
  );
};
