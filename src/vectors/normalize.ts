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

/**
 * A step a model's card applies to the full-width vector before a Matryoshka cut (a model without
 * one is cut as it is). `layer-norm`: torch's `F.layer_norm` over the whole width, without a learned
 * scale or bias (nomic-embed-text-v1.5's card: layer norm, then the first N components, then L2).
 */
export interface BeforeCut {
  step: 'layer-norm';
  /** Added to the variance, as torch's `eps`. */
  epsilon: number;
}

/**
 * Every row centred and scaled to unit variance, in place, and returns `rows`: `(x - mean) /
 * sqrt(var + epsilon)` with the biased variance, as torch's `F.layer_norm(x, (dim,), eps=epsilon)`
 * without weight and bias. Sums in float64, so the only rounding is the float32 result's. A constant
 * row becomes zeros (with an epsilon of 0, NaN: torch's too).
 */
export function layerNormRows(rows: Float32Array, dim: number, epsilon: number): Float32Array {
  checkShape(rows, dim);
  if (!(epsilon >= 0)) throw new RangeError(`epsilon must be a number of at least 0, got ${epsilon}`);
  for (let start = 0; start < rows.length; start += dim) {
    const end = start + dim;
    let sum = 0;
    for (let j = start; j < end; j++) sum += rows[j]!;
    const mean = sum / dim;
    let squares = 0;
    for (let j = start; j < end; j++) squares += (rows[j]! - mean) ** 2;
    const scale = 1 / Math.sqrt(squares / dim + epsilon);
    for (let j = start; j < end; j++) rows[j] = (rows[j]! - mean) * scale;
  }
  return rows;
}

/** `before` applied to every full row of `rows`, in place (the step a card puts before a Matryoshka cut); returns `rows`. */
export function applyBeforeCut(rows: Float32Array, dim: number, before: BeforeCut): Float32Array {
  switch (before.step) {
    case 'layer-norm':
      return layerNormRows(rows, dim, before.epsilon);
  }
}

function checkShape(rows: Float32Array, dim: number): void {
  if (!Number.isInteger(dim) || dim < 1 || rows.length % dim !== 0) {
    throw new RangeError(`a matrix of ${rows.length} values does not have rows of ${dim}`);
  }
}
