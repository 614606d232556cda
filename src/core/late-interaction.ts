/**
 * Late interaction (ColBERT): queries and documents as one L2-normalised vector per token, a
 * document's relevance the sum over query tokens of their best cosine with any of its tokens
 * (MaxSim). Encoding follows PyLate and colbert-ir's ColBERT:
 * - a marker token after the first special token: the query prefix or the document prefix;
 * - a query is cut to `queryLength` tokens and padded to it with [MASK] (query augmentation); the
 *   [MASK] tokens are not attended unless the model says so, but their vectors count;
 * - a document is cut to `documentLength` tokens, and its punctuation (the skiplist) left out of
 *   its vectors; a longer document is split into windows and scores as its best window.
 */
import type { LateInteraction, ServedModel } from '../models/registry.js';
import { l2NormalizeRows } from '../vectors/normalize.js';
import type { CoreContext } from './context.js';
import type { EngineInput } from '../engine/scheduler.js';

export type Side = 'query' | 'document';

/** A query's token ids (marker inserted, [MASK]-padded) and how many of them are attended. */
export function encodeQuery(model: ServedModel, text: string): EngineInput {
  const late = model.lateInteraction!;
  const ids = withMarker(model, model.tokenizer.encode(text), late.queryMarkerId, late.queryLength);
  if (!late.queryExpansion || ids.length >= late.queryLength) return { ids };
  const padded = new Int32Array(late.queryLength).fill(late.maskId);
  padded.set(ids);
  return { ids: padded, attended: late.attendToExpansion ? undefined : ids.length };
}

/**
 * A document's token ids (marker included), in windows of at most `documentLength` tokens: the
 * first window only unless `windows` allows more, consecutive windows sharing `overlap` tokens.
 */
export function encodeDocument(model: ServedModel, content: Int32Array, windows = 1, overlap = 0): EngineInput[] {
  const late = model.lateInteraction!;
  const size = Math.min(late.documentLength - 1, model.maxTokens) - model.tokenizer.singleSpecials;
  const step = size - Math.min(overlap, Math.floor(size / 4));
  const out: EngineInput[] = [];
  for (let start = 0; out.length < windows; start += step) {
    out.push({
      ids: withMarker(model, content.subarray(start, start + size), late.documentMarkerId, late.documentLength),
    });
    if (start + size >= content.length) break;
  }
  return out;
}

/** [CLS] marker content [SEP]: the content cut so that the whole is at most `limit` tokens. */
function withMarker(model: ServedModel, content: Int32Array, marker: number, limit: number): Int32Array {
  const single = model.tokenizer.single(content, Math.min(limit - 1, model.maxTokens));
  const ids = new Int32Array(single.length + 1);
  ids[0] = single[0]!;
  ids[1] = marker;
  ids.set(single.subarray(1), 2);
  return ids;
}

/** Token vectors of `inputs` from the engine, L2-normalised per token; for documents, the skiplist's tokens left out. */
export async function tokenVectors(
  ctx: CoreContext,
  model: ServedModel,
  inputs: EngineInput[],
  side: Side,
  signal?: AbortSignal,
) {
  const job = await ctx.scheduler.submit(model.id, inputs, signal, 'tokens');
  const width = job.width;
  l2NormalizeRows(job.output, width);
  const rows: Float32Array[] = [];
  let at = 0;
  job.counts!.forEach((count, i) => {
    const all = job.output.subarray(at * width, (at + count) * width);
    at += count;
    rows.push(side === 'document' ? withoutSkiplist(all, inputs[i]!.ids, width, model.lateInteraction!) : all);
  });
  return { rows, width, queueMs: job.queueMs, loadMs: job.loadMs, inferenceMs: job.inferenceMs };
}

function withoutSkiplist(vectors: Float32Array, ids: Int32Array, width: number, late: LateInteraction): Float32Array {
  let kept = 0;
  for (const id of ids) if (!late.skiplist.has(id)) kept++;
  if (kept === ids.length) return vectors;
  const out = new Float32Array(kept * width);
  let at = 0;
  ids.forEach((id, t) => {
    if (late.skiplist.has(id)) return;
    out.set(vectors.subarray(t * width, (t + 1) * width), at * width);
    at++;
  });
  return out;
}

/** MaxSim: for each query vector its largest dot product with a document vector, summed (vectors normalised: cosines). */
export function maxSim(query: Float32Array, document: Float32Array, width: number): number {
  const queryTokens = query.length / width;
  const documentTokens = document.length / width;
  let total = 0;
  for (let q = 0; q < queryTokens; q++) {
    let best = -Infinity;
    const qa = q * width;
    for (let d = 0; d < documentTokens; d++) {
      const da = d * width;
      let dot = 0;
      for (let k = 0; k < width; k++) dot += query[qa + k]! * document[da + k]!;
      if (dot > best) best = dot;
    }
    if (documentTokens > 0) total += best;
  }
  return total;
}
