/**
 * POST /v1/embeddings and POST /v1/engines/{model}/embeddings (OpenAI's shape). Inputs may be
 * texts, token ids, images and content parts, in the shapes of OpenAI, vLLM, Infinity and Jina
 * (embedding-inputs.ts). The response is written straight from the Float32Array: float JSON per
 * vector, or base64 of the vector's little-endian bytes. Our extensions: `"encoding_format"` int8, uint8, binary or
 * ubinary answers quantized vectors (core/quantized-embeddings.ts) as arrays of integers, and
 * `"sparse"` a sparse model's vectors as `{"indices": [...], "values": [...]}`, optionally cut to
 * the `top_k` largest.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from 'typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { reportCacheHits } from './cache-hits.js';
import type { CoreContext } from '../core/context.js';
import { embed, type EmbedResult } from '../core/embeddings.js';
import { quantizeEmbeddings, type QuantizedEmbeddings } from '../core/quantized-embeddings.js';
import { invalid } from '../errors.js';
import { embedSparse, type SparseEmbedResult } from '../core/sparse.js';
import { float32ToBase64, float32ToJson } from '../vectors/encoding.js';
import { EmbeddingsInputSchema, MessagesSchema, ModalitySchema, readEmbeddingsInput } from './embedding-inputs.js';
import { imageSourceOptions, type ImageLoadTimings, type ImageSourceOptions } from './image-sources.js';
import { sendJsonText } from './json-text.js';
import { longInputsFields } from './long-inputs.js';
import type { HttpServices } from './services.js';
import { ErrorResponse, errorResponses, responseHeaders, withHeaders } from './schemas.js';
import { imagePhases, operationPhases, reportTimings } from './timing.js';

export const EmbeddingsBody = Type.Object(
  {
    input: Type.Optional(EmbeddingsInputSchema),
    messages: Type.Optional(MessagesSchema),
    modality: Type.Optional(ModalitySchema),
    model: Type.Optional(
      Type.String({ description: 'A served embedding model id (GET /v1/models). Absent: the first served embedder.' }),
    ),
    encoding_format: Type.Optional(
      Type.Union(
        [
          Type.Literal('float'),
          Type.Literal('base64'),
          Type.Literal('int8'),
          Type.Literal('uint8'),
          Type.Literal('binary'),
          Type.Literal('ubinary'),
          Type.Literal('sparse'),
        ],
        {
          default: 'float',
          description:
            'Extensions: int8 / uint8 (each dimension on 256 levels over its range on the shipped calibration text), binary / ubinary (a sign bit per dimension, 8 to a byte, first dimension in the high bit; binary is the byte minus 128), as sentence-transformers\' quantize_embeddings, after the dimensions cut; sparse: a sparse model\'s vectors as {"indices", "values"}, the nonzero weights by vocabulary id.',
        },
      ),
    ),
    top_k: Type.Optional(
      Type.Integer({
        minimum: 1,
        description: "With encoding_format sparse: keep each vector's top_k largest weights.",
      }),
    ),
    dimensions: Type.Optional(
      Type.Integer({
        minimum: 0,
        description:
          '0 or absent: native width; 1..native: first N components, L2-renormalised (the Matryoshka cut, after the step the model card puts before it, if any).',
      }),
    ),
    user: Type.Optional(Type.String()),
    input_type: Type.Optional(
      Type.Union([Type.Literal('query'), Type.Literal('document')], {
        description: "Adds the model's query or document prefix, for models trained with one.",
      }),
    ),
    ...longInputsFields,
  },
  { additionalProperties: true },
);
export type EmbeddingsBody = Static<typeof EmbeddingsBody>;

const EmbeddingsResponse = Type.Object({
  object: Type.Literal('list'),
  data: Type.Array(
    Type.Object({
      object: Type.Literal('embedding'),
      index: Type.Integer(),
      embedding: Type.Union([
        Type.Array(Type.Number()),
        Type.String({ description: 'base64 of little-endian float32' }),
        Type.Array(Type.Integer(), { description: 'int8, uint8, binary, ubinary: integers' }),
        Type.Object(
          { indices: Type.Array(Type.Integer()), values: Type.Array(Type.Number()) },
          { description: 'encoding_format sparse: vocabulary ids, ascending, and their weights' },
        ),
      ]),
    }),
  ),
  model: Type.String(),
  usage: Type.Object(
    { prompt_tokens: Type.Integer(), total_tokens: Type.Integer() },
    {
      description:
        "Tokens fed to the model: each text's tokens (special tokens included), and each image's vision sequence length (its patches, plus the class token where the model has one).",
    },
  ),
});

/** Each vector as JSON: float numbers, base64 of the float32 bytes, or the quantized integers. */
export function vectorsJson(result: EmbedResult, format: 'float' | 'base64' | QuantizedEmbeddings): string[] {
  const { vectors, dimensions, count } = result;
  const out = new Array<string>(count);
  for (let i = 0; i < count; i++) {
    if (typeof format === 'object') {
      out[i] = `[${format.rows.subarray(i * format.width, (i + 1) * format.width).join(',')}]`;
      continue;
    }
    const row = vectors.subarray(i * dimensions, (i + 1) * dimensions);
    out[i] = format === 'base64' ? `"${float32ToBase64(row)}"` : float32ToJson(row);
  }
  return out;
}

export function serializeEmbeddings(result: EmbedResult, format: 'float' | 'base64' | QuantizedEmbeddings): string {
  const parts = vectorsJson(result, format).map(
    (value, i) => `{"object":"embedding","index":${i},"embedding":${value}}`,
  );
  return `{"object":"list","data":[${parts.join(',')}],"model":${JSON.stringify(result.model)},"usage":{"prompt_tokens":${result.promptTokens},"total_tokens":${result.promptTokens}}}`;
}

export function serializeSparseEmbeddings(result: SparseEmbedResult): string {
  const parts = result.vectors.map(
    ({ indices, values }, i) =>
      `{"object":"embedding","index":${i},"embedding":{"indices":[${indices.join(',')}],"values":${float32ToJson(values)}}}`,
  );
  return `{"object":"list","data":[${parts.join(',')}],"model":${JSON.stringify(result.model)},"usage":{"prompt_tokens":${result.promptTokens},"total_tokens":${result.promptTokens}}}`;
}

/**
 * What POST /v1/embeddings answers for `body` (with `model` from the path or the body), as JSON
 * text; batches run their requests through it too.
 */
export async function createEmbeddings(
  core: CoreContext,
  answerLimit: number,
  imageOptions: ImageSourceOptions & { maxInputs: number },
  body: EmbeddingsBody,
  model: string | undefined,
  signal: AbortSignal,
): Promise<{ result: EmbedResult | SparseEmbedResult; payload: string; imageTimings?: ImageLoadTimings }> {
  const format = body.encoding_format ?? 'float';
  const { input, imageTimings } = await readEmbeddingsInput(body, imageOptions, signal);
  if (format === 'sparse') {
    if (body.dimensions)
      throw invalid('dimensions', 'dimensions does not apply to sparse vectors; top_k keeps the largest weights.');
    if (body.late_chunking)
      throw invalid(
        'late_chunking',
        'late_chunking averages dense token vectors; it does not apply to sparse vectors.',
      );
    const result = await embedSparse(
      core,
      { model, input, inputType: body.input_type, topK: body.top_k, answerLimit, longInputs: body.long_inputs },
      signal,
    );
    return { result, payload: serializeSparseEmbeddings(result) };
  }
  if (body.top_k !== undefined)
    throw invalid('top_k', 'top_k applies to sparse vectors only: send "encoding_format": "sparse".');
  const request = {
    model,
    input,
    dimensions: body.dimensions,
    inputType: body.input_type,
    longInputs: body.long_inputs,
    lateChunking: body.late_chunking,
  };
  const result = await embed(core, request, signal);
  if (format === 'float' || format === 'base64')
    return { result, payload: serializeEmbeddings(result, format), imageTimings };
  return {
    result,
    payload: serializeEmbeddings(result, await quantizeEmbeddings(core, request, result, format)),
    imageTimings,
  };
}

export const embeddingsRoutes: FastifyPluginAsyncTypebox<HttpServices> = async (app, { core, config }) => {
  const answerLimit = config.maxResponseMb * 1024 * 1024;
  const imageOptions = { ...imageSourceOptions(config), maxInputs: config.maxInputs };
  const schema = {
    tags: ['Embeddings'],
    body: EmbeddingsBody,
    response: {
      200: withHeaders(EmbeddingsResponse, responseHeaders.timing, responseHeaders.cacheHits),
      ...errorResponses,
      // An image named by URL: its server failed, or did not answer in time.
      502: ErrorResponse,
      504: ErrorResponse,
    },
  };

  const handle = (body: EmbeddingsBody, model: string | undefined, signal: AbortSignal) =>
    createEmbeddings(core, answerLimit, imageOptions, body, model, signal);

  app.post('/v1/embeddings', { schema: { ...schema, summary: 'Create embeddings' } }, async (request, reply) => {
    const { result, payload, imageTimings } = await handle(request.body, request.body.model, request.clientSignal);
    reportTimings(reply, { ...imagePhases(request, imageTimings), ...operationPhases(result.timings) });
    reportCacheHits(reply, result);
    return sendJsonText(reply, payload);
  });

  // The path names the model; a different `model` in the body is ignored (the path wins), as the
  // legacy OpenAI engines API did. A Hub repo id ("owner/name") may come with its slash as it is.
  const enginePath = async (
    request: FastifyRequest<{ Body: EmbeddingsBody; Params: { model?: string; owner?: string; name?: string } }>,
    reply: FastifyReply,
  ) => {
    const { model, owner, name } = request.params;
    const { result, payload, imageTimings } = await handle(
      request.body,
      model ?? `${owner}/${name}`,
      request.clientSignal,
    );
    reportTimings(reply, { ...imagePhases(request, imageTimings), ...operationPhases(result.timings) });
    reportCacheHits(reply, result);
    return sendJsonText(reply, payload);
  };
  app.post(
    '/v1/engines/:model/embeddings',
    {
      schema: { ...schema, summary: 'Create embeddings (engine path)', params: Type.Object({ model: Type.String() }) },
    },
    enginePath,
  );
  app.post(
    '/v1/engines/:owner/:name/embeddings',
    {
      schema: {
        ...schema,
        summary: 'Create embeddings (engine path, a Hub repo id)',
        params: Type.Object({ owner: Type.String(), name: Type.String() }),
      },
    },
    enginePath,
  );
};
