/**
 * POST /v1/moderations in OpenAI's shape, answered by a served moderation classifier
 * (core/moderation.ts); without one, a 501 as for the other operations this server does not offer.
 * `categories`, `category_scores` and `category_applied_input_types` hold all of OpenAI's categories,
 * as its specification requires (and labels with no OpenAI category under their own names). A
 * category the model does not judge is false with score 0, and applies to no input type (`[]`), so
 * that a client can tell it from one judged safe.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { randomUUID } from 'node:crypto';
import { Type, type TSchema } from 'typebox';
import { moderate, moderationModel } from '../core/moderation.js';
import { ApiError, invalid } from '../errors.js';
import { moderationCategories } from '../models/catalogue.js';
import type { HttpServices } from './services.js';
import { ErrorResponse, errorResponses, responseHeaders, withHeaders } from './schemas.js';
import { operationPhases, reportTimings } from './timing.js';

const ContentPart = Type.Object(
  {
    type: Type.String({ description: '"text" (images are not supported)' }),
    text: Type.Optional(Type.String()),
  },
  { additionalProperties: true },
);

const ModerationsBody = Type.Object(
  {
    input: Type.Union([Type.String(), Type.Array(Type.String()), Type.Array(ContentPart)], {
      description: 'A text, texts, or content parts of type "text" (read together as one input).',
    }),
    model: Type.Optional(
      Type.String({
        description:
          "A served moderation classifier; absent or one of OpenAI's names (omni-moderation-latest, text-moderation-*): the first served one.",
      }),
    ),
  },
  { additionalProperties: true },
);

/** Every one of OpenAI's categories, and the model's labels that map to none under their own names. */
const EveryCategory = (value: TSchema, description: string) =>
  Type.Object(Object.fromEntries(moderationCategories.map((category) => [category, value])), {
    additionalProperties: value,
    description,
  });

const ModerationsResponse = Type.Object({
  id: Type.String(),
  model: Type.String(),
  results: Type.Array(
    Type.Object({
      flagged: Type.Boolean({ description: "Any category at or above the model's threshold (default 0.5)" }),
      categories: EveryCategory(
        Type.Boolean(),
        'Scored at or above the threshold; false for a category the model does not judge.',
      ),
      category_scores: EveryCategory(Type.Number(), "The model's score; 0 for a category it does not judge."),
      category_applied_input_types: EveryCategory(
        Type.Array(Type.Literal('text')),
        '["text"] for a category the model judges, [] for one it does not.',
      ),
    }),
  ),
});

/** The texts to judge: each string its own input; content parts one input together. */
function textsOf(input: string | string[] | Array<{ type: string; text?: string }>): string[] {
  if (typeof input === 'string') return [input];
  if (input.every((item) => typeof item === 'string')) return input;
  const parts = input as Array<{ type: string; text?: string }>;
  parts.forEach((part, i) => {
    if (part.type !== 'text')
      throw invalid(`input[${i}]`, `input[${i}] is of type "${part.type}"; only text is moderated here.`);
    if (typeof part.text !== 'string') throw invalid(`input[${i}].text`, `input[${i}] has no text.`);
  });
  if (parts.length === 0) throw invalid('input', 'input must not be empty.');
  return [parts.map((part) => part.text!).join('\n')];
}

export const moderationsRoutes: FastifyPluginAsyncTypebox<HttpServices> = async (app, { core }) => {
  app.post(
    '/v1/moderations',
    {
      schema: {
        tags: ['Moderations'],
        summary: 'Moderate texts',
        body: ModerationsBody,
        response: {
          200: withHeaders(ModerationsResponse, responseHeaders.timing),
          ...errorResponses,
          501: ErrorResponse,
        },
      },
      // Without a moderation classifier the answer is 501 whatever the body, as for the operations not offered.
      preValidation: async () => {
        moderationModel(core, undefined);
      },
    },
    async (request, reply) => {
      const body = request.body;
      const result = await moderate(core, { model: body.model, inputs: textsOf(body.input) }, request.clientSignal);
      reportTimings(reply, operationPhases(result.timings));
      return {
        id: `modr-${randomUUID().replace(/-/g, '')}`,
        model: result.model,
        results: result.results.map((verdict) => ({
          flagged: verdict.flagged,
          categories: verdict.categories,
          category_scores: verdict.categoryScores,
          category_applied_input_types: Object.fromEntries(
            Object.keys(verdict.categories).map((key) => [key, verdict.judged.includes(key) ? ['text'] : []]),
          ),
        })),
      };
    },
  );
  // The other methods on the path: not offered, as OpenAI's API has none.
  app.route({
    method: ['GET', 'PUT', 'PATCH', 'DELETE'],
    url: '/v1/moderations',
    schema: { hide: true },
    handler: async () => {
      throw new ApiError('unsupported_operation', 'Moderations take POST.');
    },
  });
};
