/**
 * The rerank operation: a query and documents in, documents ordered by relevance out.
 * A document longer than the model's window is split into overlapping windows, each scored with
 * the query, and scores as its best window: no part of it is silently dropped (up to the
 * configured number of windows).
 *
 * A late-interaction (ColBERT) model reranks through the same operation: the query and each
 * document window are encoded to token vectors and the document scores by MaxSim
 * (late-interaction.ts); its score is that sum, not a probability.
 */
import { randomUUID } from 'node:crypto';
import { invalid } from '../errors.js';
import type { RerankScoring } from '../models/facts.js';
import type { ServedModel } from '../models/registry.js';
import { chunkPair } from '../text/chunking.js';
import { operationSpan, recordSpan, tokenizeAttributes, tracer } from '../tracing/spans.js';
import { sigmoid } from '../vectors/scores.js';
import type { CoreContext, Timings } from './context.js';
import { encodeDocument, encodeQuery, maxSim, tokenVectors } from './late-interaction.js';
import { mapInSlices } from './map-in-slices.js';
import { templatePairs, type TemplatePairs } from './template-pairs.js';

export interface RerankRequest {
  model?: string;
  query: string;
  documents: string[];
  /** Absent or 0: all documents. */
  topN?: number;
  /** Cut each document to this many tokens before scoring (Cohere's max_tokens_per_doc). */
  maxTokensPerDoc?: number;
  /** What relevance means, for a reranker that takes an instruction (Qwen3-Reranker, bge-reranker-v2-gemma); absent: its default. */
  instruction?: string;
}

export interface RerankScore {
  index: number;
  /** sigmoid(logit), in (0, 1); for a late-interaction model, the MaxSim sum. */
  score: number;
  /** The relevance log-odds: the head's logit (one label), or positive minus negative logit (two). */
  logit: number;
}

export interface RerankResult {
  id: string;
  model: string;
  /** Sorted by score, highest first, cut to topN. */
  results: RerankScore[];
  /** Tokens fed to the model over all (query, window) pairs, special tokens included. */
  totalTokens: number;
  queryTokens: number;
  documentTokens: number;
  /** Windows scored: one per document unless documents were split. */
  pairs: number;
  timings: Timings;
}

/**
 * A row's relevance as a log-odds, so that the score is always its sigmoid: the single logit of a
 * one-label head, or for a two-label head the positive label's logit minus the other's (the
 * softmax probability of the positive label is exactly the sigmoid of that difference).
 */
function relevanceLogit(scoring: RerankScoring): (logits: Float32Array, at: number) => number {
  if (scoring.kind === 'sigmoid') return (logits, at) => logits[at]!;
  const negative = 1 - scoring.positive;
  return (logits, at) => logits[at + scoring.positive]! - logits[at + negative]!;
}

export function rerank(ctx: CoreContext, request: RerankRequest, signal?: AbortSignal): Promise<RerankResult> {
  return tracer
    ? operationSpan(tracer, 'rerank', request.model, () => rerankUntraced(ctx, request, signal), rerankOutcome)
    : rerankUntraced(ctx, request, signal);
}

const rerankOutcome = (result: RerankResult) => ({ model: result.model, inputTokens: result.totalTokens });

async function rerankUntraced(ctx: CoreContext, request: RerankRequest, signal?: AbortSignal): Promise<RerankResult> {
  const model = ctx.registry.resolve(request.model, 'rerank');
  const { query, documents } = request;
  if (query.length === 0) throw invalid('query', 'query must not be empty.');
  if (query.length > ctx.limits.maxInputChars)
    throw invalid('query', `query has ${query.length} characters; at most ${ctx.limits.maxInputChars} are accepted.`);
  if (documents.length === 0) throw invalid('documents', 'documents must not be empty.');
  if (documents.length > ctx.limits.maxInputs)
    throw invalid(
      'documents',
      `documents has ${documents.length} items; at most ${ctx.limits.maxInputs} are accepted per request.`,
    );
  documents.forEach((doc, i) => {
    if (doc.length > ctx.limits.maxInputChars)
      throw invalid(
        `documents[${i}]`,
        `documents[${i}] has ${doc.length} characters; at most ${ctx.limits.maxInputChars} are accepted.`,
      );
  });
  const topN = request.topN ?? 0;
  if (!Number.isInteger(topN) || topN < 0) throw invalid('top_n', 'top_n must be a non-negative integer.');
  if (
    request.maxTokensPerDoc !== undefined &&
    (!Number.isInteger(request.maxTokensPerDoc) || request.maxTokensPerDoc < 1)
  ) {
    throw invalid('max_tokens_per_doc', 'max_tokens_per_doc must be a positive integer.');
  }

  if (request.instruction !== undefined) {
    if (!model.rerankTemplate)
      throw invalid(
        'instruction',
        `The model "${model.id}" takes no instruction; instruction-following rerankers (Qwen3-Reranker, bge-reranker-v2-gemma) do.`,
      );
    if (request.instruction.length === 0) throw invalid('instruction', 'instruction must not be empty.');
    if (request.instruction.length > ctx.limits.maxInputChars)
      throw invalid(
        'instruction',
        `instruction has ${request.instruction.length} characters; at most ${ctx.limits.maxInputChars} are accepted.`,
      );
  }

  if (model.lateInteraction) return rerankByMaxSim(ctx, model, request, topN, signal);

  const started = performance.now();
  const chunking = { overlap: ctx.limits.rerankChunkOverlap, maxChunks: ctx.limits.rerankMaxChunks };
  const built = model.rerankTemplate
    ? await templatePairs(model, model.rerankTemplate, request, chunking, signal)
    : await crossEncoderPairs(model, request, chunking, signal);
  const { inputs, owners, documentTokens } = built;
  const tokenized = performance.now();
  let totalTokens = 0;
  for (const input of inputs) totalTokens += input.ids.length;
  if (tracer) recordSpan(tracer, 'tokenize', started, tokenized, tokenizeAttributes(inputs.length, totalTokens));
  const tokenizeMs = tokenized - started;

  const job = await ctx.scheduler.submit(model.id, inputs, signal);
  const best = new Float64Array(documents.length).fill(-Infinity);
  const logOdds = relevanceLogit(model.rerankScoring);
  for (let row = 0; row < owners.length; row++) {
    const logit = logOdds(job.output, row * job.width);
    if (logit > best[owners[row]!]!) best[owners[row]!] = logit;
  }
  const results: RerankScore[] = Array.from(best, (logit, index) => ({ index, logit, score: sigmoid(logit) }));
  results.sort((a, b) => b.logit - a.logit || a.index - b.index);
  return {
    id: randomUUID(),
    model: model.id,
    results: topN > 0 ? results.slice(0, topN) : results,
    totalTokens,
    queryTokens: built.leadTokens,
    documentTokens,
    pairs: inputs.length,
    timings: { tokenizeMs, queueMs: job.queueMs, loadMs: job.loadMs, inferenceMs: job.inferenceMs },
  };
}

/** A cross-encoder's inputs: the query paired with each document window, its special tokens around them. */
async function crossEncoderPairs(
  model: ServedModel,
  request: RerankRequest,
  chunking: { overlap: number; maxChunks: number },
  signal?: AbortSignal,
): Promise<TemplatePairs> {
  const tokenizer = model.tokenizer;
  const queryIds = tokenizer.encode(request.query);
  // Windows are at least half the room long; an overlap above a quarter of the room would make
  // consecutive windows mostly repeat each other (and small models could not honour it at all).
  const room = model.maxTokens - tokenizer.pairSpecials;
  const overlap = Math.min(chunking.overlap, Math.floor(room / 4));
  const chunkOptions = { overlap, maxChunks: chunking.maxChunks };
  const owners: number[] = [];
  const inputs: { ids: Int32Array; typeIds: Uint8Array }[] = [];
  let documentTokens = 0;
  const perDocument = await mapInSlices(
    request.documents,
    (doc) => {
      let docIds = tokenizer.encode(doc);
      if (request.maxTokensPerDoc !== undefined && docIds.length > request.maxTokensPerDoc)
        docIds = docIds.subarray(0, request.maxTokensPerDoc);
      documentTokens += docIds.length;
      return chunkPair(queryIds, docIds, model.maxTokens, tokenizer.pairSpecials, chunkOptions).map((window) =>
        tokenizer.pair(queryIds, window, model.maxTokens),
      );
    },
    signal,
  );
  perDocument.forEach((pairs, index) => {
    for (const pair of pairs) {
      inputs.push(pair);
      owners.push(index);
    }
  });
  return { inputs, owners, leadTokens: queryIds.length, documentTokens };
}

/** Rerank with a ColBERT model: each document (its best window) scored by MaxSim against the query's token vectors. */
async function rerankByMaxSim(
  ctx: CoreContext,
  model: ServedModel,
  request: RerankRequest,
  topN: number,
  signal?: AbortSignal,
): Promise<RerankResult> {
  const started = performance.now();
  const query = encodeQuery(model, request.query);
  const owners: number[] = [];
  const windows = await mapInSlices(
    request.documents,
    (doc) => {
      let content = model.tokenizer.encode(doc);
      if (request.maxTokensPerDoc !== undefined && content.length > request.maxTokensPerDoc)
        content = content.subarray(0, request.maxTokensPerDoc);
      return encodeDocument(model, content, ctx.limits.rerankMaxChunks, ctx.limits.rerankChunkOverlap);
    },
    signal,
  );
  const inputs = windows.flatMap((list, index) => list.map((input) => (owners.push(index), input)));
  const tokenized = performance.now();
  let documentTokens = 0;
  for (const input of inputs) documentTokens += input.ids.length;
  if (tracer)
    recordSpan(
      tracer,
      'tokenize',
      started,
      tokenized,
      tokenizeAttributes(inputs.length + 1, query.ids.length + documentTokens),
    );
  const tokenizeMs = tokenized - started;

  const [queryVectors, documentVectors] = await Promise.all([
    tokenVectors(ctx, model, [query], 'query', signal),
    tokenVectors(ctx, model, inputs, 'document', signal),
  ]);
  const best = new Float64Array(request.documents.length).fill(-Infinity);
  documentVectors.rows.forEach((vectors, row) => {
    const score = maxSim(queryVectors.rows[0]!, vectors, documentVectors.width);
    if (score > best[owners[row]!]!) best[owners[row]!] = score;
  });
  const results: RerankScore[] = Array.from(best, (score, index) => ({ index, score, logit: score }));
  results.sort((a, b) => b.score - a.score || a.index - b.index);
  return {
    id: randomUUID(),
    model: model.id,
    results: topN > 0 ? results.slice(0, topN) : results,
    totalTokens: query.ids.length + documentTokens,
    queryTokens: query.ids.length,
    documentTokens,
    pairs: inputs.length,
    timings: {
      tokenizeMs,
      queueMs: Math.max(queryVectors.queueMs, documentVectors.queueMs),
      loadMs: Math.max(queryVectors.loadMs, documentVectors.loadMs),
      inferenceMs: queryVectors.inferenceMs + documentVectors.inferenceMs,
    },
  };
}
