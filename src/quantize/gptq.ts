/**
 * GPTQ rounding (Frantar et al., 2022): int8 values for a MatMul weight that minimise the error of
 * the MatMul's output on calibration inputs, rather than of each weight on its own.
 *
 * For one output column, with e = w - q * scale the rounding error of its K weights and x an input
 * row, the output error is x . e, and its mean square over the calibration rows is e^T H e with
 * H = X^T X / rows. GPTQ rounds the K rows in order and, after each, lets the rows not yet rounded
 * absorb its error in the way H says costs least. Written here as the equivalent nearest-plane
 * form: with H = U D U^T (U unit upper triangular),
 *   e^T H e = sum_i D_i (e_i + sum_{j<i} U[j,i] e_j)^2,
 * so row i is rounded from w_i + sum_{j<i} U[j,i] e_j, which zeroes its term up to rounding.
 * U D U^T is the Cholesky factorisation of H with the index order reversed.
 *
 * The grid (one scale per column, from the original weights' max |w|) is fixed beforehand, so
 * the result is stored and run exactly as a round-to-nearest weight is.
 */
import { toGrid } from './int8-grid.js';

export interface GptqOptions {
  /** Added to H's diagonal, as a fraction of its mean diagonal: keeps the factorisation stable
   *  when calibration rows do not span every input direction. */
  damp?: number;
}

export const DEFAULT_DAMP = 0.01;

/**
 * Int8 values for the row-major [k, n] weight `w` on the grid `scales` (one per column), given
 * `hessian` = X^T X (row-major [k, k], any positive multiple) of the MatMul's input. With a
 * diagonal H (uncorrelated inputs) this is round-to-nearest.
 */
export function gptqRound(
  w: Float32Array,
  k: number,
  n: number,
  scales: Float32Array,
  hessian: Float64Array,
  options: GptqOptions = {},
): Int8Array {
  const l = reversedCholesky(hessian, k, options.damp ?? DEFAULT_DAMP);
  const values = new Int8Array(k * n);
  // The weights each row is rounded from: the original plus what earlier rows pushed onto it.
  const target = Float64Array.from(w.subarray(0, k * n));
  // Rows go in blocks: within a block each row pushes its error onto the next at once; the rows
  // after the block get the whole block's errors in one pass, which keeps the errors in cache.
  const block = Math.min(BLOCK, k);
  const errors = new Float64Array(block * n);
  const u = new Float64Array(block * k); // U[i, j] for the block's rows i
  for (let start = 0; start < k; start += block) {
    const end = Math.min(start + block, k);
    for (let i = start; i < end; i++) {
      // U[i, j] = L[k-1-i, k-1-j] / L[k-1-j, k-1-j]: one row of L, read backwards.
      const lRow = (k - 1 - i) * k;
      const uRow = (i - start) * k;
      for (let j = i + 1; j < k; j++) {
        const b = k - 1 - j;
        u[uRow + j] = l[lRow + b]! / l[b * k + b]!;
      }
    }
    for (let i = start; i < end; i++) {
      const row = i * n;
      const e = (i - start) * n;
      for (let c = 0; c < n; c++) {
        const q = toGrid(target[row + c]!, scales[c]!);
        values[row + c] = q;
        errors[e + c] = w[row + c]! - q * scales[c]!;
      }
      const uRow = (i - start) * k;
      for (let j = i + 1; j < end; j++) addScaled(target, j * n, u[uRow + j]!, errors, e, n);
    }
    for (let j = end; j < k; j++) {
      for (let i = start; i < end; i++) addScaled(target, j * n, u[(i - start) * k + j]!, errors, (i - start) * n, n);
    }
  }
  return values;
}

const BLOCK = 64;

/** a[ao .. ao+n) += f * b[bo .. bo+n) */
function addScaled(a: Float64Array, ao: number, f: number, b: Float64Array, bo: number, n: number): void {
  if (f === 0) return;
  let c = 0;
  for (; c + 3 < n; c += 4) {
    a[ao + c]! += f * b[bo + c]!;
    a[ao + c + 1]! += f * b[bo + c + 1]!;
    a[ao + c + 2]! += f * b[bo + c + 2]!;
    a[ao + c + 3]! += f * b[bo + c + 3]!;
  }
  for (; c < n; c++) a[ao + c]! += f * b[bo + c]!;
}

/**
 * The lower Cholesky factor L of H with its index order reversed (R[a][b] = H[k-1-a][k-1-b] =
 * L L^T), after damping. If rounding leaves the damped H not quite positive definite, the damping
 * grows tenfold and it tries again.
 */
function reversedCholesky(hessian: Float64Array, k: number, damp: number): Float64Array {
  let meanDiagonal = 0;
  for (let i = 0; i < k; i++) meanDiagonal += hessian[i * k + i]!;
  meanDiagonal /= k;
  // No rows (all zero): nothing to go by; the damping alone makes H diagonal, i.e. round to nearest.
  if (!(meanDiagonal > 0) || !Number.isFinite(meanDiagonal)) meanDiagonal = 1;
  for (let attempt = 0, d = damp; attempt < 6; attempt++, d *= 10) {
    const lower = new Float64Array(k * k);
    for (let a = 0; a < k; a++) {
      const ha = (k - 1 - a) * k + (k - 1);
      for (let b = 0; b < a; b++) lower[a * k + b] = hessian[ha - b]!;
      lower[a * k + a] = hessian[ha - a]! + d * meanDiagonal;
    }
    if (choleskyInPlace(lower, k)) return lower;
  }
  throw new Error('the calibration statistics are not a usable covariance (not positive definite even with damping)');
}

/** Overwrites the lower triangle of the row-major symmetric `a` with its Cholesky factor; false if not positive definite. */
function choleskyInPlace(a: Float64Array, k: number): boolean {
  // Rows in tiles, so that each earlier row is read once per tile rather than once per row.
  for (let i0 = 0; i0 < k; i0 += TILE) {
    const i1 = Math.min(i0 + TILE, k);
    // The tile's entries left of it, from the rows above the tile (already final).
    for (let j = 0; j < i0; j++) {
      const rj = j * k;
      const djj = a[rj + j]!;
      for (let i = i0; i < i1; i++) {
        const ri = i * k;
        a[ri + j] = (a[ri + j]! - dot(a, ri, rj, j)) / djj;
      }
    }
    // The tile itself.
    for (let i = i0; i < i1; i++) {
      const ri = i * k;
      for (let j = i0; j <= i; j++) {
        const rj = j * k;
        const s = a[ri + j]! - dot(a, ri, rj, j);
        if (i === j) {
          if (!(s > 0)) return false;
          a[ri + i] = Math.sqrt(s);
        } else {
          a[ri + j] = s / a[rj + j]!;
        }
      }
    }
  }
  return true;
}

const TILE = 32;

/** sum of a[x + t] * a[y + t] for t < n, in four independent sums. */
function dot(a: Float64Array, x: number, y: number, n: number): number {
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let t = 0;
  for (; t + 3 < n; t += 4) {
    s0 += a[x + t]! * a[y + t]!;
    s1 += a[x + t + 1]! * a[y + t + 1]!;
    s2 += a[x + t + 2]! * a[y + t + 2]!;
    s3 += a[x + t + 3]! * a[y + t + 3]!;
  }
  for (; t < n; t++) s0 += a[x + t]! * a[y + t]!;
  return s0 + s1 + s2 + s3;
}
