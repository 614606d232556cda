/**
 * Windows over a document too long for a cross-encoder, so that no part of it is silently dropped:
 * each window is scored with the query (`tokenizer.pair(query, window, maxTokens)`) and the
 * document scores as its best window.
 */

export interface ChunkOptions {
  /** Tokens shared by consecutive windows. */
  overlap: number;
  /** At most this many windows, the first ones. */
  maxChunks: number;
  /**
   * Longest query kept, so that documents keep room. Default and minimum: half the content room,
   * rounded up: `longest_first` cannot cut a long query below that while the window is longer,
   * so a smaller cap would shorten the windows instead. To cap harder, shorten the query first.
   */
  maxQueryTokens?: number;
}

/**
 * The document windows to pair with `query` within `maxTokens` (special tokens included).
 *
 * Windows are `maxTokens - pairSpecials - min(query, maxQueryTokens)` tokens long (the last one
 * may be shorter) and are sized so that `pair(query, window, maxTokens)` never cuts them. When the
 * query takes at most half the room, the first window is exactly what plain `longest_first`
 * truncation keeps of the document, so `maxChunks: 1` is plain truncation. A document that fits
 * is one window: the document itself.
 */
export function chunkPair(
  query: Int32Array,
  doc: Int32Array,
  maxTokens: number,
  pairSpecials: number,
  opts: ChunkOptions,
): Int32Array[] {
  const { overlap, maxChunks } = opts;
  const room = maxTokens - pairSpecials;
  const half = Math.ceil(room / 2);
  const maxQuery = opts.maxQueryTokens ?? half;
  if (!Number.isInteger(room) || room < 2)
    throw new RangeError(
      `maxTokens must leave at least 2 tokens besides the ${pairSpecials} special ones, got ${maxTokens}`,
    );
  if (!Number.isInteger(maxQuery) || maxQuery < half || maxQuery >= room) {
    throw new RangeError(
      `maxQueryTokens must be an integer from ${half} (half the room) to ${room - 1}, got ${maxQuery}`,
    );
  }
  if (!Number.isInteger(maxChunks) || maxChunks < 1)
    throw new RangeError(`maxChunks must be a positive integer, got ${maxChunks}`);
  // Checked against the shortest window (longest query), so a bad setting fails on every call.
  if (!Number.isInteger(overlap) || overlap < 0 || overlap >= room - maxQuery) {
    throw new RangeError(
      `overlap must be an integer from 0 to ${room - maxQuery - 1} (the shortest window), got ${overlap}`,
    );
  }

  const size = room - Math.min(query.length, maxQuery);
  if (doc.length <= size) return [doc];
  const step = size - overlap;
  const windows: Int32Array[] = [];
  for (let start = 0; windows.length < maxChunks; start += step) {
    windows.push(doc.subarray(start, start + size));
    // Stop at the window that reaches the end: a further one would lie inside it.
    if (start + size >= doc.length) break;
  }
  return windows;
}
