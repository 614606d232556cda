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
    const length = lengths[i]!;
    if (!Number.isInteger(length) || length < 0 || length > seqLen)
      throw new RangeError(`lengths[${i}] is ${length}; rows hold ${seqLen} tokens`);
    if (length === 0) continue;
    sum.fill(0);
    const start = i * seqLen * dim;
    const end = start + length * dim;
    for (let t = start; t < end; t += dim) {
      for (let d = 0; d < dim; d++) sum[d]! += hidden[t + d]!;
    }
    const row = i * dim;
    for (let d = 0; d < dim; d++) out[row + d] = sum[d]! / length;
  }
  return out;
}

/**
 * The sentence-transformers pooling modes. `lasttoken` is the last real token of each row (decoder
 * embedders, right-padded here so the index is `lengths[i] - 1`); `weightedmean` weighs token t
 * (from 1) by t; `mean_sqrt_len` divides the sum by the square root of the length.
 */
export type Pooling = 'mean' | 'cls' | 'max' | 'lasttoken' | 'weightedmean' | 'mean_sqrt_len';

export const poolings: readonly Pooling[] = ['mean', 'cls', 'max', 'lasttoken', 'weightedmean', 'mean_sqrt_len'];

/** Pools `[count, seqLen, dim]` token vectors into `[count, dim]` by `mode`. */
export function pool(
  mode: Pooling,
  hidden: Float32Array,
  lengths: ArrayLike<number>,
  seqLen: number,
  dim: number,
): Float32Array {
  switch (mode) {
    case 'mean':
      return meanPool(hidden, lengths, seqLen, dim);
    case 'cls':
      return clsPool(hidden, lengths.length, seqLen, dim);
    case 'max':
      return maxPool(hidden, lengths, seqLen, dim);
    case 'lasttoken':
      return lastTokenPool(hidden, lengths, seqLen, dim);
    case 'weightedmean':
      return weightedSumPool(
        hidden,
        lengths,
        seqLen,
        dim,
        (t) => t + 1,
        (n) => (n * (n + 1)) / 2,
      );
    case 'mean_sqrt_len':
      return weightedSumPool(hidden, lengths, seqLen, dim, () => 1, Math.sqrt);
  }
}

/** Each row's element-wise maximum over its real tokens. */
export function maxPool(hidden: Float32Array, lengths: ArrayLike<number>, seqLen: number, dim: number): Float32Array {
  return eachRow(hidden, lengths, seqLen, dim, (row, start, length) => {
    row.set(hidden.subarray(start, start + dim));
    for (let t = start + dim; t < start + length * dim; t += dim) {
      for (let d = 0; d < dim; d++) if (hidden[t + d]! > row[d]!) row[d] = hidden[t + d]!;
    }
  });
}

/** The vector of each row's last real token. */
export function lastTokenPool(
  hidden: Float32Array,
  lengths: ArrayLike<number>,
  seqLen: number,
  dim: number,
): Float32Array {
  return eachRow(hidden, lengths, seqLen, dim, (row, start, length) =>
    row.set(hidden.subarray(start + (length - 1) * dim, start + length * dim)),
  );
}

/** sum_t weight(t) * h_t / divisor(length), in float64. */
function weightedSumPool(
  hidden: Float32Array,
  lengths: ArrayLike<number>,
  seqLen: number,
  dim: number,
  weight: (t: number) => number,
  divisor: (length: number) => number,
): Float32Array {
  const sum = new Float64Array(dim);
  return eachRow(hidden, lengths, seqLen, dim, (row, start, length) => {
    sum.fill(0);
    for (let t = 0; t < length; t++) {
      const w = weight(t);
      const at = start + t * dim;
      for (let d = 0; d < dim; d++) sum[d]! += w * hidden[at + d]!;
    }
    const by = divisor(length);
    for (let d = 0; d < dim; d++) row[d] = sum[d]! / by;
  });
}

/**
 * `[count, dim]` vectors, each row filled by `fill` from its real tokens (`start`: the row's first
 * token in `hidden`); a row of length 0 stays zero.
 */
function eachRow(
  hidden: Float32Array,
  lengths: ArrayLike<number>,
  seqLen: number,
  dim: number,
  fill: (row: Float32Array, start: number, length: number) => void,
): Float32Array {
  const count = lengths.length;
  checkShape(hidden, count, seqLen, dim);
  const out = new Float32Array(count * dim);
  for (let i = 0; i < count; i++) {
    const length = checkLength(lengths, i, seqLen);
    if (length > 0) fill(out.subarray(i * dim, i * dim + dim), i * seqLen * dim, length);
  }
  return out;
}

function checkLength(lengths: ArrayLike<number>, i: number, seqLen: number): number {
  const length = lengths[i]!;
  if (!Number.isInteger(length) || length < 0 || length > seqLen)
    throw new RangeError(`lengths[${i}] is ${length}; rows hold ${seqLen} tokens`);
  return length;
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
