/**
 * Shared TypeBox schemas: one source for validation, types and the OpenAPI document.
 */
import { Type, type Static, type TUnsafe } from 'typebox';

export const ErrorResponse = Type.Object(
  {
    error: Type.Object({
      message: Type.String(),
      type: Type.String(),
      param: Type.Union([Type.String(), Type.Null()]),
      code: Type.String(),
    }),
  },
  { $id: 'ErrorResponse', description: 'Every error has this shape; `code` is stable (see the error catalogue).' },
);
export type ErrorResponse = Static<typeof ErrorResponse>;

/** Error responses every model route may give. */
export const errorResponses = {
  400: ErrorResponse,
  401: ErrorResponse,
  403: ErrorResponse,
  404: ErrorResponse,
  413: ErrorResponse,
  415: ErrorResponse,
  429: ErrorResponse,
  503: ErrorResponse,
};

/**
 * Response headers for the OpenAPI document: @fastify/swagger reads a response schema's `headers`.
 * `x-request-id` is on every response (app.ts adds it to every documented success).
 */
export const responseHeaders = {
  requestId: {
    'x-request-id': {
      type: 'string',
      description:
        "The request's id: the x-request-id the client sent, else a new UUID. Log lines of the request carry it.",
    },
  },
  timing: {
    'server-timing': {
      type: 'string',
      description:
        'Where the time went, in ms: `tokenize`, `queue` (the longest wait of the inputs), `load` (of that wait, the time its model was loading; only where it was) and `inference` (summed over batches); with images also `parse` (the JSON body), `base64` and `header` (the images decoded from base64 and their headers checked) and `preprocess` (their decoding and preprocessing in the workers, summed over batches); image edits: `decode`, `edit`, `inference`, `encode`.',
    },
  },
  cacheHits: {
    'x-cache-hits': {
      type: 'integer',
      minimum: 0,
      description:
        'How many of the inputs were served from the embedding cache, not a model run. Absent when the server keeps no cache.',
    },
  },
} as const;

/** `schema` with response headers documented (the schema object itself is not changed). */
export function withHeaders<T extends object>(schema: T, ...headers: Record<string, object>[]): T {
  const existing = (schema as { headers?: Record<string, object> }).headers;
  return { ...schema, headers: Object.assign({}, existing, ...headers) as Record<string, object> };
}

/** One of `values`, as a union of literals; typed as one of them even when the list is built at run time. */
export function LiteralUnion<T extends string>(
  values: readonly T[],
  options: { description?: string } = {},
): TUnsafe<T> {
  return Type.Unsafe<T>(
    Type.Union(
      values.map((value) => Type.Literal(value)),
      options,
    ),
  );
}

/** Ollama's keep_alive (duration.ts), on the Ollama routes and the admin's model load. */
export const keepAliveSchema = Type.Union([Type.String(), Type.Number()], {
  description:
    'How long the model stays loaded once idle: a duration (`5m`, `30s`, `1h30m`), a number of seconds, negative: until the server stops, 0: unloaded as soon as it is idle. Absent: the keepAlive setting.',
});

/** The rerank routes' `instruction`: what relevance means, for a reranker that takes one. */
export const instructionField = Type.String({
  description:
    "What relevance means, in the model's own words (Qwen3-Reranker's `<Instruct>`; bge-reranker-v2-gemma's prompt). Absent: the model card's instruction. Refused for rerankers that take none.",
});
