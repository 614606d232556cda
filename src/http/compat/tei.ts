/**
 * Hugging Face text-embeddings-inference (TEI) routes, at TEI's paths (no /v1): POST /embed,
 * /embed_sparse, /embed_all, /rerank, /predict, /similarity, /tokenize, /decode, GET /info, and POST / (TEI's
 * default route: embed, or rerank or predict when the first TEI model is a reranker or a classifier). A TEI process
 * serves one model, so its requests name none; the teiModels setting says which served models answer.
 *
 * Errors are TEI's: its body, `{error, error_type}` (plus the catalogue's stable `code`), and the status TEI gives
 * that type (an empty batch 400, a batch over the limit 413, other bad input 422, a model that can not serve
 * the route 424); a missing key is a 401 without a body, as TEI's.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { ConfigError } from '../../config.js';
import { classifyWith, type ClassifyInput } from '../../core/classify.js';
import { embed, OutputKindError } from '../../core/embeddings.js';
import { rerank } from '../../core/rerank.js';
import { embedSparse } from '../../core/sparse.js';
import { embedTokens } from '../../core/token-embeddings.js';
import { decode, tokenize } from '../../core/tokens.js';
import { ApiError, type ErrorCode } from '../../errors.js';
import type { Registry, ServedModel } from '../../models/registry.js';
import { version } from '../../version.js';
import { reportCacheHits } from '../cache-hits.js';
import { errorHandler, type ErrorRenderer, type ErrorStatus } from '../errors.js';
import { sendJsonText } from '../json-text.js';
import { instructionField, responseHeaders, withHeaders } from '../schemas.js';
import { longInputsFields } from '../long-inputs.js';
import { defaultLongInputs } from '../../core/long-inputs.js';
import type { HttpServices } from '../services.js';
import { operationPhases, reportTimings } from '../timing.js';
import { float32ToJson } from '../../vectors/encoding.js';
import { cosine } from '../../vectors/scores.js';
import { vectorsToJson } from './vectors.js';

const tags = ['TEI compatibility'];

/** TEI's error types (its ErrorType), each with the status TEI answers it with. */
const teiStatuses = {
  Empty: 400,
  Validation: 422,
  Tokenizer: 422,
  Backend: 424,
  Overloaded: 429,
  Unhealthy: 503,
} as const;
type TeiErrorType = keyof typeof teiStatuses;

/** A refusal of TEI's router before the operation runs (an empty batch, one over the limit): TEI's type and status. */
class TeiRejection extends ApiError {
  constructor(
    readonly errorType: TeiErrorType,
    readonly teiStatus: number,
    message: string,
    param: string,
  ) {
    super('invalid_request', message, { param });
  }
}

const errorTypes: Partial<Record<ErrorCode, TeiErrorType>> = {
  overloaded: 'Overloaded',
  not_ready: 'Unhealthy',
  shutting_down: 'Unhealthy',
  model_not_found: 'Backend',
  internal: 'Backend',
  upstream_error: 'Backend',
  timeout: 'Backend',
  unsupported_operation: 'Backend',
};
// A model that does not give what the route asks for (a SPLADE model at /embed): TEI's backend refuses it.
const errorType = (error: ApiError): TeiErrorType =>
  error instanceof TeiRejection
    ? error.errorType
    : error instanceof OutputKindError
      ? 'Backend'
      : (errorTypes[error.code] ?? 'Validation');

/**
 * TEI's status: its type's where TEI's router answers (bad input 422, a model that can not serve the route 424), the
 * catalogue's where TEI's HTTP layer answers before the router (a body that is not JSON, too large, of another type)
 * and for the failures TEI has no status of its own for (a bug, a timeout, a server still starting).
 */
const teiStatus: ErrorStatus = (error) => {
  if (error instanceof TeiRejection) return error.teiStatus;
  if (error instanceof OutputKindError) return teiStatuses.Backend;
  if (error.code === 'invalid_request' || error.code === 'input_too_long') return teiStatuses.Validation;
  if (error.code === 'model_not_found') return teiStatuses.Backend;
  return error.status;
};
// TEI answers a missing or wrong key with a bare 401.
const teiError: ErrorRenderer = (error) =>
  error.code === 'unauthorized' ? undefined : { error: error.message, error_type: errorType(error), code: error.code };

const TeiError = Type.Object(
  {
    error: Type.String(),
    error_type: Type.Unsafe<TeiErrorType>({
      type: 'string',
      enum: Object.keys(teiStatuses),
      description: "TEI's error type",
    }),
    code: Type.String({ description: "The error catalogue's stable code" }),
  },
  { description: "TEI's error shape, with the catalogue's code." },
);
const errorResponses = {
  400: { ...TeiError, description: 'Empty: an empty batch or text; Validation: a body that is not JSON' },
  401: Type.Null({ description: 'A missing or wrong API key: no body, as TEI answers' }),
  413: { ...TeiError, description: 'Validation: a batch over the limit, or a body over the body limit' },
  415: TeiError,
  422: { ...TeiError, description: 'Validation: a bad input, or one over the window with truncate false' },
  424: { ...TeiError, description: 'Backend: no TEI model here serves the route' },
  429: TeiError,
  503: TeiError,
};

/** TEI's checks of a batch before it runs: no item, or an empty one, is `Empty`; more than the limit, a 413. */
function checkBatch(items: readonly unknown[], limit: number, param = 'inputs', extra = 0): void {
  const empty = (item: unknown) => item === '' || (Array.isArray(item) && (item.length === 0 || item.includes('')));
  if (items.length === 0 || items.some(empty))
    throw new TeiRejection('Empty', teiStatuses.Empty, `\`${param}\` cannot be empty`, param);
  const size = items.length + extra;
  if (size > limit)
    throw new TeiRejection('Validation', 413, `batch size ${size} > maximum allowed batch size ${limit}`, param);
}

/** /embed's inputs as a batch: a text or one list of token ids is one input. */
const embedBatch = (inputs: string | string[] | number[] | number[][]): unknown[] =>
  typeof inputs === 'string' || typeof inputs[0] === 'number' ? [inputs] : inputs;

const OptionalBoolean = (description: string) =>
  Type.Optional(Type.Union([Type.Boolean(), Type.Null()], { description }));
/** A string of a few values; validation errors list them (a union of literals says "must be equal to constant"). */
const OneOf = <T extends string>(values: readonly T[], description: string) =>
  Type.Optional(Type.Unsafe<T | null>({ type: ['string', 'null'], enum: [...values, null], description }));
const TruncationDirection = OneOf(
  ['Right', 'Left', 'right', 'left'],
  'Which end of a too-long input is cut (default Right: keep the start).',
);
const PromptName = Type.Optional(
  Type.Union([Type.String({ minLength: 1 }), Type.Null()], {
    description:
      'A prompt the model declares (its config_sentence_transformers.json `prompts`), or query / document: put before each input.',
  }),
);

const EmbedBody = Type.Object(
  {
    inputs: Type.Union(
      [Type.String(), Type.Array(Type.String()), Type.Array(Type.Integer()), Type.Array(Type.Array(Type.Integer()))],
      { description: 'A text, texts, token ids, or arrays of token ids.' },
    ),
    normalize: Type.Optional(
      Type.Boolean({ default: true, description: 'L2-normalise the vectors (false: the pooled vectors as they are).' }),
    ),
    truncate: OptionalBoolean(
      "Cut inputs longer than the model's window (absent or null: the server's truncate setting).",
    ),
    truncation_direction: TruncationDirection,
    prompt_name: PromptName,
    dimensions: Type.Optional(
      Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
        description: 'Keep the first N components, renormalised (the Matryoshka cut, as the model card computes it).',
      }),
    ),
    ...longInputsFields,
  },
  { additionalProperties: true },
);

/** /embed_sparse and /embed_all take /embed's body but its vector options. */
const PerTokenBody = Type.Object(
  {
    inputs: EmbedBody.properties.inputs,
    truncate: EmbedBody.properties.truncate,
    truncation_direction: TruncationDirection,
    prompt_name: PromptName,
  },
  { additionalProperties: true },
);
const SparseValue = Type.Object({ index: Type.Integer(), value: Type.Number() });

const RerankBody = Type.Object(
  {
    query: Type.String(),
    texts: Type.Array(Type.String()),
    raw_scores: Type.Optional(
      Type.Boolean({ default: false, description: 'Answer the logits instead of their sigmoid.' }),
    ),
    return_text: Type.Optional(Type.Boolean({ default: false })),
    truncate: OptionalBoolean(
      'Accepted; a text over the window is always split into windows and scores as its best one.',
    ),
    truncation_direction: TruncationDirection,
    instruction: Type.Optional(instructionField),
  },
  { additionalProperties: true },
);

/** In a batch, TEI writes a text as a list of one: [text] or [text, text_pair]; a bare text is taken too. */
const Sequence = Type.Union([Type.String(), Type.Tuple([Type.String()]), Type.Tuple([Type.String(), Type.String()])]);
const PredictBody = Type.Object(
  {
    inputs: Type.Union([Type.String(), Type.Array(Sequence)], {
      description:
        'A text, a pair [text, text_pair], or a batch [[text], [text, text_pair], ...]. As in TEI, a list of one or two strings is one input (a text, a pair); a list of more strings is a batch of texts.',
    }),
    raw_scores: Type.Optional(
      Type.Boolean({
        default: false,
        description: "The head's logits instead of its scores (softmax, or sigmoid per label).",
      }),
    ),
    truncate: OptionalBoolean(
      "Cut inputs longer than the model's window (absent or null: the server's truncate setting).",
    ),
    truncation_direction: TruncationDirection,
  },
  { additionalProperties: true },
);

const SimilarityBody = Type.Object(
  {
    inputs: Type.Object({
      source_sentence: Type.String({ description: 'The text the others are compared with.' }),
      sentences: Type.Array(Type.String(), { description: 'The texts compared with source_sentence.' }),
    }),
    parameters: Type.Optional(
      Type.Union([
        Type.Object(
          {
            truncate: OptionalBoolean(
              "Cut inputs longer than the model's window (absent or null: the server's truncate setting).",
            ),
            truncation_direction: TruncationDirection,
            prompt_name: PromptName,
          },
          { additionalProperties: true },
        ),
        Type.Null(),
      ]),
    ),
  },
  { additionalProperties: true },
);

const TokenizeBody = Type.Object(
  {
    inputs: Type.Union([Type.String(), Type.Array(Type.String())]),
    add_special_tokens: Type.Optional(Type.Boolean({ default: true })),
    prompt_name: PromptName,
  },
  { additionalProperties: true },
);

const DecodeBody = Type.Object(
  {
    ids: Type.Union([Type.Array(Type.Integer({ minimum: 0 })), Type.Array(Type.Array(Type.Integer({ minimum: 0 })))]),
    skip_special_tokens: Type.Optional(Type.Boolean({ default: true })),
  },
  { additionalProperties: true },
);

const Prediction = Type.Object({ score: Type.Number(), label: Type.String() });
const Rank = Type.Object({ index: Type.Integer(), score: Type.Number(), text: Type.Optional(Type.String()) });
const SimpleToken = Type.Object({
  id: Type.Integer(),
  text: Type.String(),
  special: Type.Boolean(),
  start: Type.Union([Type.Integer(), Type.Null()], {
    description: 'Code point offset into the input; null for special tokens.',
  }),
  stop: Type.Union([Type.Integer(), Type.Null()]),
});
const Info = Type.Object({
  model_id: Type.String(),
  model_sha: Type.Union([Type.String(), Type.Null()], {
    description: 'The Hub commit the files came from, when known.',
  }),
  model_dtype: Type.String(),
  served_model_name: Type.String({ description: 'The id requests elsewhere on this server name the model by.' }),
  model_type: Type.Union([
    Type.Object({ embedding: Type.Object({ pooling: Type.String() }) }),
    Type.Object({
      reranker: Type.Object({
        id2label: Type.Record(Type.String(), Type.String()),
        label2id: Type.Record(Type.String(), Type.Integer()),
      }),
    }),
    Type.Object({
      classifier: Type.Object({
        id2label: Type.Record(Type.String(), Type.String()),
        label2id: Type.Record(Type.String(), Type.Integer()),
      }),
    }),
  ]),
  max_concurrent_requests: Type.Integer(),
  max_input_length: Type.Integer(),
  max_batch_tokens: Type.Integer(),
  max_batch_requests: Type.Integer(),
  max_client_batch_size: Type.Integer(),
  auto_truncate: Type.Boolean(),
  tokenization_workers: Type.Integer(),
  version: Type.String(),
  sha: Type.Null(),
  docker_label: Type.Null(),
  device: Type.String({
    description:
      "Not in TEI's answer: where the model runs, `cpu` or an accelerator (the placement's device when loaded, else the one it loads on).",
  }),
});

interface TeiModels {
  embedder?: ServedModel;
  /** Answers /embed_sparse and /embed_all: the first listed model that gives sparse or token vectors. */
  sparse?: ServedModel;
  tokens?: ServedModel;
  reranker?: ServedModel;
  classifier?: ServedModel;
  /** Describes the server in /info and tokenises: the first listed. */
  primary?: ServedModel;
}

/** The served models the TEI routes use; a name that is not served stops the start. */
export function pickTeiModels(registry: Registry, ids: readonly string[]): TeiModels {
  const served = registry.list();
  const chosen =
    ids.length > 0
      ? ids.map((id) => {
          const model = served.find((m) => m.id === id);
          if (!model)
            throw new ConfigError(
              `teiModels (ONNX_GATEWAY_TEI_MODELS): "${id}" is not served here; served models: ${served.map((m) => m.id).join(', ')}.`,
            );
          return model;
        })
      : (['embedding', 'rerank', 'classify'] as const)
          .map((task) => served.find((m) => m.task === task))
          .filter((m): m is ServedModel => m !== undefined);
  // Without a list, a sparse or token-vector model served beside the dense embedder still answers its routes.
  const withKind = (kind: 'sparse' | 'tokens') =>
    (ids.length > 0 ? chosen : served).find((m) => m.task === 'embedding' && m.heads.kinds.includes(kind));
  const dense = chosen.find((m) => m.task === 'embedding' && m.heads.kinds.includes('dense'));
  return {
    embedder: dense ?? chosen.find((m) => m.task === 'embedding'),
    sparse: withKind('sparse'),
    tokens: withKind('tokens'),
    reranker: chosen.find((m) => m.task === 'rerank'),
    classifier: chosen.find((m) => m.task === 'classify'),
    primary: chosen[0],
  };
}

function none(task: string): ApiError {
  return new ApiError(
    'model_not_found',
    `No ${task} model answers the TEI routes here: list one in ONNX_GATEWAY_TEI_MODELS.`,
  );
}

const direction = (value: string | null | undefined): 'left' | 'right' | undefined =>
  value ? (value.toLowerCase() === 'left' ? 'left' : 'right') : undefined;

export const teiRoutes: FastifyPluginAsyncTypebox<HttpServices> = async (app, { core, registry, config }) => {
  const models = pickTeiModels(registry, config.teiModels);
  app.setErrorHandler(errorHandler(teiError, teiStatus));
  const limit = core.limits.maxInputs;
  const answerLimit = config.maxResponseMb * 1024 * 1024;

  const embedSchema = {
    tags,
    summary: 'Embed (TEI)',
    body: EmbedBody,
    response: {
      200: withHeaders(Type.Array(Type.Array(Type.Number())), responseHeaders.timing, responseHeaders.cacheHits),
      ...errorResponses,
    },
  };
  const serveEmbed = (url: string, hide: boolean) =>
    app.post(url, { schema: { ...embedSchema, hide } }, async (request, reply) => {
      if (!models.embedder) throw none('embedding');
      const body = request.body;
      checkBatch(embedBatch(body.inputs), limit);
      const result = await embed(
        core,
        {
          model: models.embedder.id,
          input: body.inputs,
          normalize: body.normalize ?? true,
          truncate: body.truncate ?? undefined,
          truncationDirection: direction(body.truncation_direction),
          inputType: body.prompt_name ?? undefined,
          dimensions: body.dimensions ?? undefined,
          longInputs: body.long_inputs,
          lateChunking: body.late_chunking,
        },
        request.clientSignal,
      );
      reportTimings(reply, operationPhases(result.timings));
      reportCacheHits(reply, result);
      return sendJsonText(reply, vectorsToJson(result));
    });

  const rerankSchema = {
    tags,
    summary: 'Rerank (TEI)',
    body: RerankBody,
    response: { 200: withHeaders(Type.Array(Rank), responseHeaders.timing), ...errorResponses },
  };
  const serveRerank = (url: string, hide: boolean) =>
    app.post(url, { schema: { ...rerankSchema, hide } }, async (request, reply) => {
      if (!models.reranker) throw none('rerank');
      const { query, texts, raw_scores: raw, return_text: withText, instruction } = request.body;
      checkBatch(texts, limit, 'texts');
      const result = await rerank(
        core,
        { model: models.reranker.id, query, documents: texts, instruction },
        request.clientSignal,
      );
      reportTimings(reply, operationPhases(result.timings));
      return result.results.map(({ index, score, logit }) => ({
        index,
        score: raw ? logit : score,
        ...(withText ? { text: texts[index]! } : {}),
      }));
    });

  const predictSchema = {
    tags,
    summary: 'Classify (TEI)',
    body: PredictBody,
    response: {
      200: withHeaders(
        Type.Union([Type.Array(Prediction), Type.Array(Type.Array(Prediction))], {
          description: 'One list per input, best label first; one list alone for a single input.',
        }),
        responseHeaders.timing,
      ),
      ...errorResponses,
    },
  };
  const servePredict = (url: string, hide: boolean) =>
    app.post(url, { schema: { ...predictSchema, hide } }, async (request, reply) => {
      // As TEI's, /predict answers a cross-encoder too: its logit's sigmoid (two logits: their softmax) under its label.
      const model = models.classifier ?? models.reranker;
      if (!model) throw none('classify');
      const { inputs, raw_scores: raw, truncate, truncation_direction: cut } = request.body;
      // As TEI reads them: a text, or a list of one or two strings, is one input (a text, a pair); other lists are batches.
      const single =
        typeof inputs === 'string' ||
        (inputs.length > 0 && inputs.length <= 2 && inputs.every((item) => typeof item === 'string'));
      const sequences = single ? [inputs] : (inputs as Array<string | string[]>);
      checkBatch(sequences, limit);
      const batch = sequences.map((item): ClassifyInput =>
        typeof item === 'string' ? item : item.length === 1 ? item[0]! : [item[0]!, item[1]!],
      );
      const result = await classifyWith(
        core,
        model,
        { inputs: batch, truncate: truncate ?? undefined, truncationDirection: direction(cut), param: 'inputs' },
        request.clientSignal,
      );
      reportTimings(reply, operationPhases(result.timings));
      const width = result.labels.length;
      const values = raw ? result.logits : result.scores;
      const predictions = batch.map((_, row) =>
        result.labels.map((label, i) => ({ score: values[row * width + i]!, label })).sort((a, b) => b.score - a.score),
      );
      return single ? predictions[0]! : predictions;
    });

  serveEmbed('/embed', false);
  serveRerank('/rerank', false);
  servePredict('/predict', false);
  // TEI's default route answers the served model's task; the OpenAPI document lists it under its own path.
  if (models.primary?.task === 'rerank') serveRerank('/', true);
  else if (models.primary?.task === 'classify') servePredict('/', true);
  else serveEmbed('/', true);

  app.post(
    '/tokenize',
    {
      schema: {
        tags,
        summary: 'Tokenize (TEI)',
        body: TokenizeBody,
        response: { 200: Type.Array(Type.Array(SimpleToken)), ...errorResponses },
      },
    },
    async (request) => {
      const { inputs, add_special_tokens: addSpecialTokens, prompt_name: promptName } = request.body;
      checkBatch(typeof inputs === 'string' ? [inputs] : inputs, limit);
      const result = await tokenize(
        core,
        {
          model: models.primary?.id,
          inputs: typeof inputs === 'string' ? [inputs] : inputs,
          addSpecialTokens,
          inputType: promptName ?? undefined,
          answerLimit,
        },
        request.clientSignal,
      );
      return result.tokens;
    },
  );

  app.post(
    '/decode',
    {
      schema: {
        tags,
        summary: 'Decode token ids (TEI)',
        body: DecodeBody,
        response: { 200: Type.Array(Type.String()), ...errorResponses },
      },
    },
    async (request) => {
      const { ids, skip_special_tokens: skipSpecialTokens } = request.body;
      // One sequence of ids, or several; an empty list is no sequence at all.
      const sequences = ids.length > 0 && ids.every((id) => typeof id === 'number') ? [ids] : (ids as number[][]);
      return decode(core, { model: models.primary?.id, ids: sequences, skipSpecialTokens }).texts;
    },
  );

  const facts = models.primary?.description;
  app.get(
    '/info',
    { schema: { tags, summary: 'Served model info (TEI)', response: { 200: Info, ...errorResponses } } },
    async () => {
      const model = models.primary;
      if (!model || !facts) throw none('served');
      const label2id = Object.fromEntries(
        Object.entries(facts.id2label).map(([index, label]) => [label, Number(index)]),
      );
      return {
        model_id: model.id,
        model_sha: model.revision ?? null,
        model_dtype: model.variant === 'int8' ? 'int8' : model.variant === 'fp16' ? 'float16' : 'float32',
        served_model_name: model.id,
        model_type:
          model.task === 'embedding'
            ? // TEI names a SPLADE model's pooling "splade".
              { embedding: { pooling: model.heads.sparse?.pooling === 'mlm' ? 'splade' : model.pooling } }
            : model.task === 'classify'
              ? { classifier: { id2label: facts.id2label, label2id } }
              : { reranker: { id2label: facts.id2label, label2id } },
        max_concurrent_requests: config.queueCapacity,
        max_input_length: model.maxTokens,
        max_batch_tokens: config.maxBatchTokens,
        max_batch_requests: model.maxBatchSize ?? config.maxBatchSize,
        max_client_batch_size: core.limits.maxInputs,
        auto_truncate: defaultLongInputs(core.limits) !== 'refuse',
        tokenization_workers: 1,
        version,
        sha: null,
        docker_label: null,
        device: core.lifecycle?.state(model.id)?.placement?.device ?? model.device,
      };
    },
  );

  const perToken = (body: {
    inputs: string | string[] | number[] | number[][];
    truncate?: boolean | null;
    truncation_direction?: string | null;
    prompt_name?: string | null;
  }) => ({
    input: body.inputs,
    truncate: body.truncate ?? undefined,
    truncationDirection: direction(body.truncation_direction),
    inputType: body.prompt_name ?? undefined,
  });
  app.post(
    '/embed_sparse',
    {
      schema: {
        tags,
        summary: 'Sparse embeddings (TEI)',
        body: PerTokenBody,
        response: { 200: withHeaders(Type.Array(Type.Array(SparseValue)), responseHeaders.timing), ...errorResponses },
      },
    },
    async (request, reply) => {
      if (!models.sparse) throw none('sparse embedding');
      checkBatch(embedBatch(request.body.inputs), limit);
      const result = await embedSparse(
        core,
        { model: models.sparse.id, ...perToken(request.body), answerLimit },
        request.clientSignal,
      );
      reportTimings(reply, operationPhases(result.timings));
      // TEI's shape: per input, its nonzero weights as {index, value}, by index.
      const rows = result.vectors.map(({ indices, values }) => {
        const numbers = values.length > 0 ? float32ToJson(values).slice(1, -1).split(',') : [];
        return `[${numbers.map((value, i) => `{"index":${indices[i]},"value":${value}}`).join(',')}]`;
      });
      return sendJsonText(reply, `[${rows.join(',')}]`);
    },
  );
  app.post(
    '/embed_all',
    {
      schema: {
        tags,
        summary: 'Token embeddings (TEI)',
        body: PerTokenBody,
        response: {
          200: withHeaders(Type.Array(Type.Array(Type.Array(Type.Number()))), responseHeaders.timing),
          ...errorResponses,
        },
      },
    },
    async (request, reply) => {
      if (!models.tokens) throw none('token embedding');
      checkBatch(embedBatch(request.body.inputs), limit);
      const result = await embedTokens(
        core,
        { model: models.tokens.id, ...perToken(request.body), answerLimit },
        request.clientSignal,
      );
      reportTimings(reply, operationPhases(result.timings));
      const { width } = result;
      const rows = result.rows.map((vectors) => {
        const tokens: string[] = [];
        for (let t = 0; t < vectors.length / width; t++)
          tokens.push(float32ToJson(vectors.subarray(t * width, (t + 1) * width)));
        return `[${tokens.join(',')}]`;
      });
      return sendJsonText(reply, `[${rows.join(',')}]`);
    },
  );

  app.post(
    '/similarity',
    {
      schema: {
        tags,
        summary: 'Sentence similarity (TEI)',
        body: SimilarityBody,
        response: {
          200: withHeaders(
            Type.Array(Type.Number(), { description: 'The cosine of source_sentence with each sentence, in order.' }),
            responseHeaders.timing,
          ),
          ...errorResponses,
        },
      },
    },
    async (request, reply) => {
      if (!models.embedder) throw none('embedding');
      const { inputs, parameters } = request.body;
      // TEI counts the source sentence in the batch.
      checkBatch(inputs.sentences, limit, 'inputs.sentences', 1);
      const result = await embed(
        core,
        {
          model: models.embedder.id,
          input: [inputs.source_sentence, ...inputs.sentences],
          truncate: parameters?.truncate ?? undefined,
          truncationDirection: direction(parameters?.truncation_direction),
          inputType: parameters?.prompt_name ?? undefined,
        },
        request.clientSignal,
      );
      reportTimings(reply, operationPhases(result.timings));
      const { vectors, dimensions: width } = result;
      const row = (i: number) => vectors.subarray(i * width, (i + 1) * width);
      return inputs.sentences.map((_, i) => cosine(row(0), row(i + 1)));
    },
  );
};
