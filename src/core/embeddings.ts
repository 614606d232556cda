/**
 * The embeddings operation: inputs (texts, token ids or images) in, one vector per input out.
 */
import { settings } from '../config.js';
import { ApiError, invalid } from '../errors.js';
import { operationSpan, recordSpan, tokenizeAttributes, tracer } from '../tracing/spans.js';
import type { OutputKind } from '../models/heads.js';
import type { ServedModel } from '../models/registry.js';
import { applyBeforeCut, cutDimensions, l2NormalizeRows } from '../vectors/normalize.js';
import type { CachedJob } from './cache/embedding-cache.js';
import type { CoreContext, Timings } from './context.js';
import { promptFor } from './prompts.js';
import { mapInSlices } from './map-in-slices.js';
import { embedItems, multimodalItems } from './image-embeddings.js';
import { lateChunk } from './late-chunking.js';
import { averageWindows, chunkWindows, longInputsOf, type LongInputs } from './long-inputs.js';

/** An image to embed: its encoded bytes (PNG, JPEG or WebP), checked and decoded by the server. */
export interface ImageItem {
  image: Uint8Array;
}

/** Text and images meant as one vector. No model served today fuses them; each refuses it. */
export interface FusedItem {
  parts: Array<string | ImageItem>;
}

/** One input of a multimodal request: a text, an image or a fused item. */
export type EmbeddingItem = string | ImageItem | FusedItem;

export type EmbeddingInput = string | string[] | number[] | number[][] | EmbeddingItem[];

export interface EmbedRequest {
  model?: string;
  input: EmbeddingInput;
  /**
   * 0 or absent: the model's own width, the vectors as they are. N: Matryoshka vectors of N
   * components, as the model's card computes them (its step before a cut, then the first N, L2).
   */
  dimensions?: number;
  /**
   * The prompt put before each text: `query` or `document` (the model's prompt of that kind), or any
   * prompt name the model declares. Absent: the model's default prompt, if it has one.
   */
  inputType?: string;
  /**
   * An input longer than the window: cut, embedded in windows averaged into one vector, or refused
   * (long-inputs.ts). Absent: as `truncate` says, else the server's longInputs setting.
   */
  longInputs?: LongInputs;
  /** The older switch: true cuts long inputs, false refuses them (when longInputs is absent). */
  truncate?: boolean;
  /**
   * Late chunking (late-chunking.ts): the texts run as one sequence, each text's vector the mean of
   * its own tokens' vectors. For mean-pooling models whose graph gives token vectors.
   */
  lateChunking?: boolean;
  /** Which end of a too-long input is cut: `right` (the default) keeps its start, `left` its end. */
  truncationDirection?: 'left' | 'right';
  /**
   * L2-normalise the vectors: absent follows the model's own configuration (and normalises when
   * `dimensions` is given), true normalises even for a model that does not, false returns the
   * pooled vectors as they are (they are still renormalised after a dimension cut, and a
   * `dimensions` of the full width still takes the model's step before a cut).
   */
  normalize?: boolean;
  /**
   * How long the model stays loaded after this request, in ms (duration.ts: FOREVER until the
   * server stops, 0 unloaded after it); absent: the keepAlive setting. The Ollama routes' `keep_alive`.
   */
  keepAliveMs?: number;
}

export interface EmbedResult {
  model: string;
  /** count x dimensions, row-major. */
  vectors: Float32Array;
  dimensions: number;
  count: number;
  /** Tokens fed to the model, special tokens included. */
  promptTokens: number;
  /** Inputs served from the embedding cache; absent when the server keeps none. */
  cacheHits?: number;
  timings: Timings;
}

/** Splits the OpenAI input union into texts or token-id lists (image items are embed()'s alone: multimodal.ts). */
export function normaliseInput(input: EmbeddingInput): { texts?: string[]; tokens?: number[][] } {
  if (typeof input === 'string') return { texts: [input] };
  if (!Array.isArray(input))
    throw invalid(
      'input',
      'input must be a string, an array of strings, an array of token ids or an array of arrays of token ids.',
    );
  if (input.length === 0) throw invalid('input', 'input must not be an empty array.');
  if (input.every((item) => typeof item === 'string')) return { texts: input };
  if (input.some((item) => typeof item === 'object' && item !== null && !Array.isArray(item)))
    throw invalid('input', 'images are embedded as dense vectors only, by the embeddings operation.');
  if (input.every((item) => typeof item === 'number')) return { tokens: [input] };
  if (input.every((item) => Array.isArray(item))) return { tokens: input };
  throw invalid('input', 'input must not mix strings, numbers and arrays.');
}

function checkDimensions(model: ServedModel, dimensions: number | undefined): number {
  if (dimensions === undefined || dimensions === 0) return model.dimensions;
  if (!Number.isInteger(dimensions) || dimensions < 0)
    throw invalid('dimensions', 'dimensions must be a positive integer.');
  if (dimensions > model.dimensions) {
    throw invalid('dimensions', `dimensions must be at most ${model.dimensions} for "${model.id}"; got ${dimensions}.`);
  }
  return dimensions;
}

/** Token ids with special tokens, cut to the model's window or refused, per the truncate setting. */
export function fit(
  model: ServedModel,
  content: Int32Array,
  truncate: boolean,
  direction: 'left' | 'right',
  param: string,
): Int32Array {
  const room = model.maxTokens - model.tokenizer.singleSpecials;
  if (content.length > room && !truncate) {
    throw new ApiError(
      'input_too_long',
      `${param} has ${content.length + model.tokenizer.singleSpecials} tokens; "${model.id}" takes at most ${model.maxTokens}.`,
      { param },
    );
  }
  // single() keeps the start; cutting from the left hands it only the end.
  const kept = direction === 'left' && content.length > room ? content.subarray(content.length - room) : content;
  return model.tokenizer.single(kept, model.maxTokens);
}

const vectorsOf: Record<OutputKind, string> = {
  dense: 'dense vectors',
  sparse: 'sparse vectors',
  tokens: 'token vectors',
};

/**
 * A model asked for an output it does not give (a SPLADE model has no dense vector). It keeps the
 * kinds the model does give, so that an API can say where each of those is asked for.
 */
export class OutputKindError extends ApiError {
  constructor(
    readonly model: string,
    readonly wanted: OutputKind,
    readonly gives: readonly OutputKind[],
    askedBy?: (kind: OutputKind) => string,
  ) {
    super('invalid_request', OutputKindError.explain(model, wanted, gives, askedBy), { param: 'model' });
    this.name = 'OutputKindError';
  }

  /** The message: the kinds the model gives by their names (its `outputs`), each followed by `askedBy(kind)` if given. */
  static explain(
    model: string,
    wanted: OutputKind,
    gives: readonly OutputKind[],
    askedBy?: (kind: OutputKind) => string,
  ): string {
    const kinds = gives.map((kind) => (askedBy ? `${kind} (${askedBy(kind)})` : kind));
    return `The model "${model}" does not give ${vectorsOf[wanted]}; it gives ${kinds.join(', ')}.`;
  }
}

/** The model, refused as an invalid request when it does not give `kind`. */
export function resolveWithKind(ctx: CoreContext, name: string | undefined, kind: OutputKind): ServedModel {
  const model = ctx.registry.resolve(name, 'embedding');
  if (!model.heads.kinds.includes(kind)) throw new OutputKindError(model.id, kind, model.heads.kinds);
  return model;
}

/** The request's texts, refused when one is empty or over maxInputChars, or when there are too many. */
export function checkTexts(ctx: CoreContext, texts: string[], paramOf: (i: number) => string): void {
  if (texts.length > ctx.limits.maxInputs)
    throw invalid(
      'input',
      `input has ${texts.length} items; at most ${ctx.limits.maxInputs} are accepted per request.`,
    );
  texts.forEach((text, i) => {
    if (text.length === 0) throw invalid(paramOf(i), 'input must not contain empty strings.');
    if (text.length > ctx.limits.maxInputChars)
      throw invalid(
        paramOf(i),
        `${paramOf(i)} has ${text.length} characters; at most ${ctx.limits.maxInputChars} are accepted.`,
      );
  });
}

/** Token-id inputs, checked against the model's vocabulary. */
export function checkTokenIds(model: ServedModel, tokens: number[][], paramOf: (i: number) => string): Int32Array[] {
  return tokens.map((ids, i) => {
    if (ids.length === 0) throw invalid(paramOf(i), 'token id arrays must not be empty.');
    const content = new Int32Array(ids.length);
    for (let t = 0; t < ids.length; t++) {
      const id = ids[t]!;
      if (!Number.isInteger(id) || id < 0 || id >= model.vocabSize) {
        throw invalid(
          paramOf(i),
          `token ids must be integers in [0, ${model.vocabSize - 1}] for "${model.id}"; got ${id}.`,
        );
      }
      content[t] = id;
    }
    return content;
  });
}

/** The token ids of a request's inputs: every sequence fed, and how each input was split into windows. */
export interface EncodedInputs {
  /** The sequences fed, special tokens included: one per input, or a chunked input's windows one after another. */
  sequences: Int32Array[];
  /** With long_inputs chunk: per input, the content tokens of each of its windows (its weights). */
  windows?: number[][];
  count: number;
  promptTokens: number;
  tokenizeMs: number;
}

/**
 * Inputs to token ids as a request asks: prompt, the window (cut, refused or split into windows),
 * token-id inputs checked against the vocabulary. `chunks` says whether the caller averages
 * windows (dense vectors), and `output` names what it gives where it does not.
 */
export async function encodeInputs(
  ctx: CoreContext,
  model: ServedModel,
  request: Pick<EmbedRequest, 'input' | 'inputType' | 'truncate' | 'truncationDirection' | 'longInputs'>,
  signal?: AbortSignal,
  /** The request field of each input, by its index (a mixed request's texts are some of its items). */
  paramOf: (i: number) => string = (i) => `input[${i}]`,
  { chunks = false, output = 'sparse or token vectors' }: { chunks?: boolean; output?: string } = {},
): Promise<EncodedInputs> {
  const mode = longInputsOf(request, ctx.limits, chunks, output);
  const direction = request.truncationDirection ?? 'right';
  const { texts, tokens } = normaliseInput(request.input);
  const count = (texts ?? tokens)!.length;
  if (count > ctx.limits.maxInputs)
    throw invalid('input', `input has ${count} items; at most ${ctx.limits.maxInputs} are accepted per request.`);

  const started = performance.now();
  let inputs: Int32Array[];
  let promptIds: Int32Array = new Int32Array(0);
  if (texts) {
    const prefix = promptFor(model, request.inputType);
    checkTexts(ctx, texts, paramOf);
    if (mode === 'chunk' && prefix) promptIds = model.tokenizer.encode(prefix);
    inputs = await mapInSlices(texts, (text) => model.tokenizer.encode(prefix + text), signal);
  } else {
    inputs = checkTokenIds(model, tokens!, paramOf);
  }
  let sequences: Int32Array[];
  let windows: number[][] | undefined;
  if (mode === 'chunk') {
    const maxInputTokens = ctx.limits.maxInputTokens ?? settings.maxInputTokens.default!;
    sequences = [];
    windows = inputs.map((ids, i) => {
      const split = chunkWindows(model, ids, promptIds, maxInputTokens, paramOf(i));
      sequences.push(...split.sequences);
      return split.contentTokens;
    });
  } else {
    sequences = inputs.map((ids, i) => fit(model, ids, mode === 'truncate', direction, paramOf(i)));
  }
  const ended = performance.now();
  let promptTokens = 0;
  // A model fed rows padded to a fixed length (SigLIP's text tower) attends every one of them.
  for (const ids of sequences) promptTokens += Math.max(ids.length, model.feeds.fixedLength ?? 0);
  if (tracer) recordSpan(tracer, 'tokenize', started, ended, tokenizeAttributes(count, promptTokens));
  return { sequences, windows, count, promptTokens, tokenizeMs: ended - started };
}

export function embed(ctx: CoreContext, request: EmbedRequest, signal?: AbortSignal): Promise<EmbedResult> {
  return tracer
    ? operationSpan(tracer, 'embeddings', request.model, () => embedUntraced(ctx, request, signal), embedOutcome)
    : embedUntraced(ctx, request, signal);
}

const embedOutcome = (result: EmbedResult) => ({ model: result.model, inputTokens: result.promptTokens });

async function embedUntraced(ctx: CoreContext, request: EmbedRequest, signal?: AbortSignal): Promise<EmbedResult> {
  const model = resolveWithKind(ctx, request.model, 'dense');
  const dimensions = checkDimensions(model, request.dimensions);
  // Ollama's keep_alive: it counts from when the model is next idle, this request done.
  if (request.keepAliveMs !== undefined) ctx.lifecycle?.keepAlive(model.id, request.keepAliveMs);
  const items = multimodalItems(request.input);
  if (request.lateChunking && items)
    throw invalid(
      'late_chunking',
      'late_chunking reads texts or token ids as one document; images can not be part of it.',
    );
  const { job, count, promptTokens, tokenizeMs } = request.lateChunking
    ? await lateChunk(ctx, model, request, signal)
    : items
      ? await embedItems(ctx, model, request, items, signal)
      : await embedTexts(ctx, model, request, signal);
  let vectors = job.output;
  // Asking for a width asks for Matryoshka vectors as the model's card computes them: its step
  // before a cut (nomic-embed-text-v1.5's layer norm) over the full width, then cut and normalised
  // (cutDimensions does both), normalised even when the width asked for is the full one. The rows
  // are this request's own (the cache hands out copies), so the step works in place.
  const cut = request.dimensions !== undefined && request.dimensions !== 0;
  if (cut && model.beforeCut) applyBeforeCut(vectors, job.width, model.beforeCut);
  if (dimensions !== job.width) vectors = cutDimensions(vectors, job.width, dimensions);
  else if (request.normalize ?? (model.normalize || cut)) l2NormalizeRows(vectors, job.width);
  return {
    model: model.id,
    vectors,
    dimensions,
    count,
    promptTokens,
    cacheHits: job.hits,
    timings: {
      tokenizeMs,
      queueMs: job.queueMs,
      loadMs: job.loadMs,
      inferenceMs: job.inferenceMs,
      ...(job.preprocessMs ? { preprocessMs: job.preprocessMs } : {}),
    },
  };
}

/** The rows of a request's texts or token ids, from the cache and the model. */
export async function embedTexts(
  ctx: CoreContext,
  model: ServedModel,
  request: Pick<EmbedRequest, 'input' | 'inputType' | 'truncate' | 'truncationDirection' | 'longInputs'>,
  signal?: AbortSignal,
  paramOf?: (i: number) => string,
): Promise<{ job: EmbeddedRows; count: number; promptTokens: number; tokenizeMs: number }> {
  const { sequences, windows, count, promptTokens, tokenizeMs } = await encodeInputs(
    ctx,
    model,
    request,
    signal,
    paramOf,
    { chunks: true },
  );
  // Only the inputs the cache lacks reach the engine; a chunked input's windows are inputs like any
  // other, cached by their own token ids, and their rows are averaged here, before normalisation.
  const compute = (missing: Int32Array[]) =>
    ctx.scheduler.submit(
      model.id,
      missing.map((ids) => ({ ids })),
      signal,
    );
  const job = ctx.embeddingCache ? await ctx.embeddingCache.run(model, sequences, compute) : await compute(sequences);
  if (windows && windows.length !== sequences.length) job.output = averageWindows(job.output, job.width, windows);
  return { job, count, promptTokens, tokenizeMs };
}

/** Pooled rows of a request's inputs, as the cache or the engine gives them. */
export type EmbeddedRows = Omit<CachedJob, 'hits'> & { hits?: number };
