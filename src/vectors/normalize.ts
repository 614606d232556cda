/** Row-wise vector normalisation on `count x dim` row-major float32 matrices. */

/**
 * Scales every row to unit L2 norm, in place, and returns `rows`. As torch's
 * `F.normalize(eps=1e-12)` (sentence-transformers' Normalize): a zero row stays zero.
 */
export function l2NormalizeRows(rows: Float32Array, dim: number): Float32Array {
  checkShape(rows, dim);
  for (let start = 0; start < rows.length; start += dim) {
    const end = start + dim;
    let sum = 0;
    for (let j = start; j < end; j++) sum += rows[j]! * rows[j]!;
    const norm = Math.max(Math.sqrt(sum), 1e-12);
    for (let j = start; j < end; j++) rows[j] = rows[j]! / norm;
  }
  return rows;
}

/**
 * The first `keep` components of every row, re-normalised to unit length (a Matryoshka cut, as
 * OpenAI's `dimensions`): a new `count x keep` matrix.
 */
export function cutDimensions(rows: Float32Array, dim: number, keep: number): Float32Array {
  checkShape(rows, dim);
  if (!Number.isInteger(keep) || keep < 1 || keep > dim)
    throw new RangeError(`keep must be an integer from 1 to ${dim}, got ${keep}`);
  const count = rows.length / dim;
  const out = new Float32Array(count * keep);
  for (let i = 0; i < count; i++) out.set(rows.subarray(i * dim, i * dim + keep), i * keep);
  return l2NormalizeRows(out, keep);
}

function checkShape(rows: Float32Array, dim: number): void {
  if (!Number.isInteger(dim) || dim < 1 || rows.length % dim !== 0) {
    throw new RangeError(`a matrix of ${rows.length} values does not have rows of ${dim}`);
  }
}
