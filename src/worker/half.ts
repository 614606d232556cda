/**
 * Half-precision tensors: the fp16 variants take and give float16, which ONNX Runtime's JavaScript
 * API holds as the raw bits in a Uint16Array, or as a Float16Array where node has one (Node 24).
 */
import type * as ort from 'onnxruntime-node';

/**
 * The output's values as float32: float16 graphs (the fp16 variants) give their outputs in half
 * precision, whose bits are read through a view whichever array holds them.
 */
export function toFloat32(tensor: ort.Tensor): Float32Array {
  if (tensor.type === 'float32') return tensor.data as Float32Array;
  if (tensor.type !== 'float16') throw new Error(`output "${tensor.type}" tensors are not supported`);
  const data = tensor.data as ArrayBufferView & { length: number };
  const half = new Uint16Array(data.buffer, data.byteOffset, data.length);
  const out = new Float32Array(half.length);
  for (let i = 0; i < half.length; i++) out[i] = halfToFloat(half[i]!);
  return out;
}

function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >> 10) & 0x1f;
  const fraction = h & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24;
  if (exponent === 0x1f) return fraction ? NaN : sign * Infinity;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

const scratch = new Float32Array(1);
const bits = new Uint32Array(scratch.buffer);

/** float32 values to float16 bits, rounded to nearest even as ONNX Runtime's Cast rounds them. */
export function floatToHalf(values: Float32Array): Uint16Array {
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) {
    scratch[0] = values[i]!;
    const x = bits[0]!;
    const sign = (x >>> 16) & 0x8000;
    const exponent = (x >>> 23) & 0xff;
    let mantissa = x & 0x7fffff;
    if (exponent === 0xff) {
      out[i] = sign | 0x7c00 | (mantissa ? 0x200 : 0);
      continue;
    }
    const e = exponent - 127 + 15;
    if (e >= 0x1f) {
      out[i] = sign | 0x7c00;
      continue;
    }
    if (e <= 0) {
      // Subnormal in half precision (or zero): the implicit bit joins the mantissa, shifted out.
      if (e < -10) {
        out[i] = sign;
        continue;
      }
      mantissa |= 0x800000;
      const shift = 14 - e;
      const half = mantissa >>> shift;
      const rest = mantissa & ((1 << shift) - 1);
      const midpoint = 1 << (shift - 1);
      out[i] = sign | (half + (rest > midpoint || (rest === midpoint && half & 1) ? 1 : 0));
      continue;
    }
    const half = (e << 10) | (mantissa >>> 13);
    const rest = mantissa & 0x1fff;
    // A carry out of the mantissa moves into the exponent, as it should (up to infinity).
    out[i] = sign | (half + (rest > 0x1000 || (rest === 0x1000 && half & 1) ? 1 : 0));
  }
  return out;
}
