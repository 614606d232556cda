/**
 * Quantized embeddings, as sentence-transformers' `quantize_embeddings` makes them:
 * - `ubinary`: one bit per dimension, set when the component is above 0, packed 8 to a byte with
 *   the first dimension in the high bit (numpy's `packbits`); a width that is no multiple of 8 is
 *   padded with 0 bits. `binary` is that byte minus 128, as an int8.
 * - `uint8` / `int8`: each dimension's calibrated range [min, max] cut into 255 steps; a component
 *   becomes its step count from min, truncated toward zero (numpy's `astype`), minus 128 for int8,
 *   computed in float32 as numpy computes it on float32 embeddings.
 *   A component outside the range is clamped (numpy's cast wraps it around), and a dimension whose
 *   range is a single value maps to the bottom of the scale (numpy's gives NaN).
 */

export type Precision = 'int8' | 'uint8' | 'binary' | 'ubinary';

/** Per dimension, the lowest value and the width of one of 255 steps. */
export interface QuantizationRanges {
  starts: Float32Array;
  steps: Float32Array;
}

/** Bytes per quantized row of `dim` components. */
export function quantizedWidth(precision: Precision, dim: number): number {
  return precision === 'binary' || precision === 'ubinary' ? Math.ceil(dim / 8) : dim;
}

/** The ranges of `rows` (count x dim, row-major): per dimension its minimum and (max - min) / 255. */
export function calibrationRanges(rows: Float32Array, dim: number): QuantizationRanges {
  const starts = new Float32Array(dim).fill(Infinity);
  const ends = new Float32Array(dim).fill(-Infinity);
  for (let at = 0; at < rows.length; at += dim) {
    for (let d = 0; d < dim; d++) {
      const value = rows[at + d]!;
      if (value < starts[d]!) starts[d] = value;
      if (value > ends[d]!) ends[d] = value;
    }
  }
  const steps = new Float32Array(dim);
  // In float32 arithmetic, as numpy computes on float32 embeddings.
  for (let d = 0; d < dim; d++) steps[d] = Math.fround(Math.fround(ends[d]! - starts[d]!) / 255);
  return { starts, steps };
}

/** Sign bits of each row, packed big-endian: count x ceil(dim / 8) bytes. */
export function packSignBits(rows: Float32Array, dim: number): Uint8Array {
  const width = Math.ceil(dim / 8);
  const count = rows.length / dim;
  const out = new Uint8Array(count * width);
  for (let r = 0; r < count; r++) {
    for (let d = 0; d < dim; d++) if (rows[r * dim + d]! > 0) out[r * width + (d >> 3)]! |= 0x80 >> (d & 7);
  }
  return out;
}

/** `rows` quantized to `precision`; int8 and uint8 need the ranges of the model's calibration rows. */
export function quantize(
  rows: Float32Array,
  dim: number,
  precision: Precision,
  ranges?: QuantizationRanges,
): Int8Array | Uint8Array {
  if (precision === 'ubinary') return packSignBits(rows, dim);
  if (precision === 'binary') {
    const packed = packSignBits(rows, dim);
    const out = new Int8Array(packed.length);
    for (let i = 0; i < packed.length; i++) out[i] = packed[i]! - 128;
    return out;
  }
  if (!ranges || ranges.starts.length !== dim)
    throw new RangeError(`${precision} needs calibration ranges of ${dim} dimensions`);
  const offset = precision === 'int8' ? 128 : 0;
  const out = precision === 'int8' ? new Int8Array(rows.length) : new Uint8Array(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const d = i % dim;
    const step = ranges.steps[d]!;
    const level = step > 0 ? Math.fround(Math.fround(rows[i]! - ranges.starts[d]!) / step) : 0;
    out[i] = Math.trunc(Math.fround(Math.min(255, Math.max(0, level)) - offset));
  }
  return out;
}
