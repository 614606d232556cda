/**
 * The grid that weights are rounded onto: symmetric, one scale per output column, values in
 * [-63, 63] (7 bits, onnxruntime's `reduce_range`; no -64, so that w and -w quantize to opposite
 * values). On x86 CPUs without VNNI (AVX2 alone), onnxruntime's u8 x s8 kernels add pairs of
 * products in int16: 2 x 255 x 127 overflows it and the results are wrong (relative errors of 0.5
 * measured on a column), while 2 x 255 x 63 = 32,130 fits. The file must run right on any CPU.
 */

export const QMAX = 63;

/** One scale per column of a row-major [k, n] matrix: max |w| / QMAX (1 for an all-zero column); undefined if it holds NaN or infinity. */
export function columnScales(w: Float32Array, k: number, n: number): Float32Array | undefined {
  const scales = new Float32Array(n);
  for (let i = 0; i < k * n; i++) {
    const a = Math.abs(w[i]!);
    if (!Number.isFinite(a)) return undefined;
    const c = i % n;
    if (a > scales[c]!) scales[c] = a;
  }
  return scales.map((max) => (max > 0 ? max / QMAX : 1));
}

/** The grid value nearest to x / scale, clamped to [-QMAX, QMAX]. */
export function toGrid(x: number, scale: number): number {
  // Divide by the stored (float32) scale, so that q * scale is what the kernel computes with.
  const q = roundHalfToEven(x / scale);
  return q > QMAX ? QMAX : q < -QMAX ? -QMAX : q;
}

/** numpy's rint, which onnxruntime's own quantizer uses. */
export function roundHalfToEven(x: number): number {
  const r = Math.round(x); // halves go up
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}
