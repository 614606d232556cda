/**
 * Sentence vectors from a model's token vectors. `hidden` is `[count, seqLen, dim]` row-major,
 * each row right-padded to `seqLen`.
 */

/**
 * The mean of each row's first `lengths[i]` token vectors: the attention-mask weighted mean of
 * sentence-transformers' mean pooling, padding excluded. Sums in float64 (it costs nothing
 * measurable) so that long inputs lose no precision. A row of length 0 gives a zero vector.
 */
export function meanPool(hidden: Float32Array, lengths: ArrayLike<number>, seqLen: number, dim: number): Float32Array {
  const count = lengths.length;
  checkShape(hidden, count, seqLen, dim);
  const out = new Float32Array(count * dim);
  const sum = new Float64Array(dim);
  for (let i = 0; i < count; i++) {
    const length = lengths[i];
    if (!Number.isInteger(length) || length < 0 || length > seqLen) throw new RangeError(`lengths[${i}] is ${length}; rows hold ${seqLen} tokens`);
    if (length === 0) continue;
    sum.fill(0);
    const start = i * seqLen * dim;
    const end = start + length * dim;
    for (let t = start; t < end; t += dim) {
      for (let d = 0; d < dim; d++) sum[d] += hidden[t + d];
    }
    const row = i * dim;
    for (let d = 0; d < dim; d++) out[row + d] = sum[d] / length;
  }
  return out;
}

/** The first token's vector of each row ([CLS] pooling). */
export function clsPool(hidden: Float32Array, count: number, seqLen: number, dim: number): Float32Array {
  checkShape(hidden, count, seqLen, dim);
  const out = new Float32Array(count * dim);
  for (let i = 0; i < count; i++) out.set(hidden.subarray(i * seqLen * dim, i * seqLen * dim + dim), i * dim);
  return out;
}

function checkShape(hidden: Float32Array, count: number, seqLen: number, dim: number): void {
  if (hidden.length !== count * seqLen * dim) {
    throw new RangeError(`hidden has ${hidden.length} values, not ${count} x ${seqLen} x ${dim}`);
  }
}
