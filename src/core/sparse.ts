/**
 * Sparse embeddings: inputs in, one sparse vector over the model's vocabulary per input out (a
 * SPLADE model's term weights, or a bge-m3-style export's token weights). The worker pools the
 * per-token scores and sends back only the nonzero weights.
 *
 * This is also the API the local search index uses for sparse retrieval: `embedSparse` with
 * `inputType` 'document' when indexing, 'query' when searching (a model with query / document
 * prompts gets them), and the vectors compared by `sparseDot`.
 */
import { invalid } from '../errors.js';
import { topKSparse } from '../vectors/sparse.js';
import { checkAnswerSize, thousands, SPARSE_ENTRY_BYTES } from '../answer-size.js';
import type { CoreContext, Timings } from './context.js';
import { encodeInputs, resolveWithKind, type EmbedRequest } from './embeddings.js';

export interface SparseEmbedRequest extends Pick<
  EmbedRequest,
  'model' | 'input' | 'inputType' | 'truncate' | 'truncationDirection' | 'longInputs'
> {
  /** Keep each vector's `topK` largest weights (absent: all nonzero weights). */
  topK?: number;
  /** Most bytes of the answer text the caller sends: a request that could need more is refused before inference. */
  answerLimit?: number;
}

export interface SparseVector {
  /** Vocabulary ids, ascending. */
  indices: Int32Array;
  /** Their weights, all positive. */
  values: Float32Array;
}

export interface SparseEmbedResult {
  model: string;
  vectors: SparseVector[];
  /** The vectors' dimension: the model's vocabulary size. */
  dimension: number;
  promptTokens: number;
  timings: Timings;
}

export async function embedSparse(
  ctx: CoreContext,
  request: SparseEmbedRequest,
  signal?: AbortSignal,
): Promise<SparseEmbedResult> {
  const model = resolveWithKind(ctx, request.model, 'sparse');
  const { topK } = request;
  if (topK !== undefined && (!Number.isInteger(topK) || topK < 1))
    throw invalid('top_k', `top_k must be a positive integer; got ${topK}.`);
  const { sequences, promptTokens, tokenizeMs } = await encodeInputs(ctx, model, request, signal, undefined, {
    output: 'sparse vectors',
  });
  if (request.answerLimit !== undefined) {
    // A SPLADE vector may weigh every vocabulary entry; token weights, at most one per token.
    const { dimension, pooling } = model.heads.sparse!;
    const weights = sequences.map((ids) =>
      Math.min(dimension, topK ?? dimension, pooling === 'weights' ? ids.length : dimension),
    );
    const total = weights.reduce((sum, n) => sum + n, 0);
    checkAnswerSize(request.answerLimit, {
      what: 'sparse vectors',
      param: 'input',
      perInput: weights.map((n) => n * SPARSE_ENTRY_BYTES + 2),
      detail: `${thousands(sequences.length)} inputs, up to ${thousands(total)} weights${pooling === 'mlm' && topK === undefined ? ` (each vector may weigh all ${thousands(dimension)} vocabulary entries; top_k bounds it)` : ''}`,
    });
  }
  const job = await ctx.scheduler.submit(
    model.id,
    sequences.map((ids) => ({ ids })),
    signal,
    'sparse',
  );
  const vectors: SparseVector[] = [];
  let at = 0;
  for (const count of job.counts!) {
    const row = { indices: job.indices!.subarray(at, at + count), values: job.output.subarray(at, at + count) };
    vectors.push(topK === undefined ? row : topKSparse(row.indices, row.values, topK));
    at += count;
  }
  return {
    model: model.id,
    vectors,
    dimension: model.heads.sparse!.dimension,
    promptTokens,
    timings: { tokenizeMs, queueMs: job.queueMs, loadMs: job.loadMs, inferenceMs: job.inferenceMs },
  };
}

/** The dot product of two sparse vectors (indices ascending): a SPLADE model's relevance score. */
export function sparseDot(a: SparseVector, b: SparseVector): number {
  let sum = 0;
  for (let i = 0, j = 0; i < a.indices.length && j < b.indices.length;) {
    const x = a.indices[i]!;
    const y = b.indices[j]!;
    if (x === y) sum += a.values[i++]! * b.values[j++]!;
    else if (x < y) i++;
    else j++;
  }
  return sum;
}
