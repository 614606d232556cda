/**
 * Sparse vectors over a vocabulary from per-token scores, computed where the scores are (the
 * worker), so that only the nonzero weights travel: a SPLADE model's logits for a 512-token input
 * are 512 x 30522 floats (62 MB), its sparse vector a few hundred entries.
 *
 * Token scores are `[count, seqLen, width]` row-major, each row right-padded to `seqLen`; `ids`
 * holds the rows' token ids concatenated (no padding), `lengths` their lengths. Tokens whose id is
 * in `skip` (the special tokens) and padding take no part.
 */

export interface SparseRows {
  /** Nonzero entries per row. */
  counts: Int32Array;
  /** Vocabulary ids, ascending within each row, rows concatenated. */
  indices: Int32Array;
  values: Float32Array;
}

/**
 * SPLADE: per vocabulary entry, the max over a row's tokens of log(1 + relu(logit)). The max is
 * taken on the raw logits (log1p is increasing) and log1p applied once per nonzero entry.
 */
export function spladePool(
  logits: Float32Array,
  ids: Int32Array,
  lengths: ArrayLike<number>,
  seqLen: number,
  vocab: number,
  skip: ReadonlySet<number>,
): SparseRows {
  const count = lengths.length;
  if (logits.length !== count * seqLen * vocab)
    throw new RangeError(`logits hold ${logits.length} values; ${count} x ${seqLen} x ${vocab} expected`);
  const best = new Float32Array(vocab);
  const rows: Array<{ indices: Int32Array; values: Float32Array }> = [];
  let offset = 0;
  for (let r = 0; r < count; r++) {
    const length = lengths[r]!;
    best.fill(0);
    for (let t = 0; t < length; t++) {
      if (skip.has(ids[offset + t]!)) continue;
      const base = (r * seqLen + t) * vocab;
      for (let v = 0; v < vocab; v++) {
        const x = logits[base + v]!;
        if (x > best[v]!) best[v] = x;
      }
    }
    offset += length;
    let nonzero = 0;
    for (let v = 0; v < vocab; v++) if (best[v]! > 0) nonzero++;
    const indices = new Int32Array(nonzero);
    const values = new Float32Array(nonzero);
    let at = 0;
    for (let v = 0; v < vocab; v++) {
      if (best[v]! > 0) {
        indices[at] = v;
        values[at++] = Math.log1p(best[v]!);
      }
    }
    rows.push({ indices, values });
  }
  return concatRows(rows);
}

/**
 * Token weights (bge-m3's lexical weights): relu of each token's weight, the max per token id;
 * `weights` is `[count, seqLen]` (a trailing dimension of 1 is the same layout).
 */
export function tokenWeightsPool(
  weights: Float32Array,
  ids: Int32Array,
  lengths: ArrayLike<number>,
  seqLen: number,
  skip: ReadonlySet<number>,
): SparseRows {
  const count = lengths.length;
  if (weights.length !== count * seqLen)
    throw new RangeError(`weights hold ${weights.length} values; ${count} x ${seqLen} expected`);
  const rows: Array<{ indices: Int32Array; values: Float32Array }> = [];
  let offset = 0;
  for (let r = 0; r < count; r++) {
    const length = lengths[r]!;
    const best = new Map<number, number>();
    for (let t = 0; t < length; t++) {
      const id = ids[offset + t]!;
      const w = weights[r * seqLen + t]!;
      if (skip.has(id) || !(w > 0)) continue;
      if (w > (best.get(id) ?? 0)) best.set(id, w);
    }
    offset += length;
    const indices = Int32Array.from([...best.keys()].sort((a, b) => a - b));
    rows.push({ indices, values: Float32Array.from(indices, (id) => best.get(id)!) });
  }
  return concatRows(rows);
}

function concatRows(rows: Array<{ indices: Int32Array; values: Float32Array }>): SparseRows {
  const counts = Int32Array.from(rows, (row) => row.indices.length);
  let total = 0;
  for (const n of counts) total += n;
  const indices = new Int32Array(total);
  const values = new Float32Array(total);
  let at = 0;
  for (const row of rows) {
    indices.set(row.indices, at);
    values.set(row.values, at);
    at += row.indices.length;
  }
  return { counts, indices, values };
}

/** The `k` largest weights of a sparse vector, still in ascending index order (all when k >= its size). */
export function topKSparse(
  indices: Int32Array,
  values: Float32Array,
  k: number,
): { indices: Int32Array; values: Float32Array } {
  if (k >= indices.length) return { indices, values };
  const order = Array.from(indices.keys()).sort((a, b) => values[b]! - values[a]! || indices[a]! - indices[b]!);
  const kept = order.slice(0, k).sort((a, b) => a - b);
  return { indices: Int32Array.from(kept, (i) => indices[i]!), values: Float32Array.from(kept, (i) => values[i]!) };
}

/** The rows of `[count, seqLen, width]` token vectors up to each row's length, concatenated. */
export function tokenRows(
  hidden: Float32Array,
  lengths: ArrayLike<number>,
  seqLen: number,
  width: number,
): Float32Array {
  let total = 0;
  for (let r = 0; r < lengths.length; r++) total += lengths[r]!;
  const out = new Float32Array(total * width);
  let at = 0;
  for (let r = 0; r < lengths.length; r++) {
    const n = lengths[r]! * width;
    out.set(hidden.subarray(r * seqLen * width, r * seqLen * width + n), at);
    at += n;
  }
  return out;
}
