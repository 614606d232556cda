/**
 * How a batch's requests run: each endpoint a batch may name, with the route's own body schema
 * and the same function its route calls, so a request in a batch is answered exactly as it would
 * be over HTTP (the body and the status of a success or of the endpoint's error), without HTTP.
 * A failure that trying later may mend (a full queue, a shutdown, a model that does not fit yet)
 * is thrown instead of answered: the batch waits and retries the request.
 */
import type { TSchema } from 'typebox';
import { Compile } from 'typebox/compile';
import type { BatchEndpoints, EndpointRunner, RequestOutcome } from '../batch/types.js';
import type { Config } from '../config.js';
import type { CoreContext } from '../core/context.js';
import { ApiError } from '../errors.js';
import { classifyTexts, ClassifyBody } from './classify.js';
import { createEmbeddings, EmbeddingsBody } from './embeddings.js';
import { imageSourceOptions } from './image-sources.js';
import { inApiTerms, paramFromPath } from './errors.js';
import { rerankDocuments, RerankBody } from './rerank.js';

/** Errors that say "later", not "never": the batch retries the request instead of answering it. */
const transient = new Set([
  'overloaded',
  'shutting_down',
  'client_closed',
  'not_ready',
  'insufficient_memory',
  'timeout',
]);

function errorOutcome(error: ApiError): RequestOutcome {
  const answer = inApiTerms(error);
  return { ok: false, status: answer.status, body: JSON.stringify(answer.toBody()) };
}

/** A runner over a route's body schema: the body checked as the route checks it, then run. */
function endpoint<T extends TSchema>(
  schema: T,
  run: (core: CoreContext, body: never, signal: AbortSignal) => Promise<{ body: string; inputTokens: number }>,
): EndpointRunner {
  const validator = Compile(schema);
  return async (core, body, signal) => {
    if (!validator.Check(body)) {
      // Worded as the routes word a failed body check (http/errors.ts): the field, and what is wrong with it.
      const first = validator.Errors(body)[0];
      const missing = (first?.params as { requiredProperties?: string[] } | undefined)?.requiredProperties?.[0];
      const param = paramFromPath(first?.instancePath ?? '', missing);
      const what = param ?? 'body';
      return errorOutcome(
        new ApiError(
          'invalid_request',
          missing ? `${what} is required.` : `${what} ${first?.message ?? 'is invalid'}.`,
          {
            param,
          },
        ),
      );
    }
    try {
      return { ok: true, status: 200, ...(await run(core, body as never, signal)) };
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      if (transient.has(error.code)) throw error;
      return errorOutcome(error);
    }
  };
}

/** The endpoints of OpenAI's batches that this server serves, run through core. */
export function batchEndpoints(
  config: Pick<
    Config,
    | 'maxResponseMb'
    | 'maxInputs'
    | 'embeddingImageMaxBytes'
    | 'imageMaxPixels'
    | 'bodyLimit'
    | 'imageUrls'
    | 'readerAllowPrivate'
    | 'readerTimeout'
  >,
): BatchEndpoints {
  const answerLimit = config.maxResponseMb * 1024 * 1024;
  // A batch's embedding requests take images as the route does.
  const imageOptions = { ...imageSourceOptions(config), maxInputs: config.maxInputs };
  return new Map<string, EndpointRunner>([
    [
      '/v1/embeddings',
      endpoint(EmbeddingsBody, async (core, body: EmbeddingsBody, signal) => {
        const { payload, result } = await createEmbeddings(core, answerLimit, imageOptions, body, body.model, signal);
        return { body: payload, inputTokens: result.promptTokens };
      }),
    ],
    [
      '/v1/rerank',
      endpoint(RerankBody, async (core, body: Parameters<typeof rerankDocuments>[1], signal) => {
        const { answer } = await rerankDocuments(core, body, signal);
        return { body: JSON.stringify(answer), inputTokens: answer.usage.prompt_tokens };
      }),
    ],
    [
      '/v1/classify',
      endpoint(ClassifyBody, async (core, body: Parameters<typeof classifyTexts>[1], signal) => {
        const { answer } = await classifyTexts(core, body, signal);
        return { body: JSON.stringify(answer), inputTokens: answer.usage.prompt_tokens };
      }),
    ],
  ]);
}
