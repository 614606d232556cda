/**
 * Pillow's resize of an 8-bit RGB image (src/libImaging/Resample.c, ImagingResample), pixel for
 * pixel: the filter weights computed in double precision as `precompute_coeffs` does, normalised to
 * fixed point with 22 fraction bits, a horizontal pass over only the rows the vertical pass reads,
 * then the vertical pass, each rounding to 8 bits with Pillow's clip. A pass whose size does not
 * change is skipped, as Pillow skips it. NEAREST is Pillow's affine scale (Geometry.c), not a filter.
 *
 * Images are packed RGB, 3 bytes a pixel (Pillow keeps 4, the fourth unused: the sums are the same).
 */
import type { Resample } from '../../models/image-processor.js';
import { arena, simdKernels } from './resample-simd.js';

export interface RgbImage {
  /** height x width x 3, row-major. */
  data: Uint8Array;
  width: number;
  height: number;
}

interface Filter {
  weight(x: number): number;
  support: number;
}

const box: Filter = { weight: (x) => (x > -0.5 && x <= 0.5 ? 1 : 0), support: 0.5 };

const bilinear: Filter = {
  weight(x) {
    if (x < 0) x = -x;
    return x < 1 ? 1 - x : 0;
  },
  support: 1,
};

// Pillow writes these two constants as C floats (0.54f, 0.46f): their float values, widened.
const HAMMING_A = Math.fround(0.54);
const HAMMING_B = Math.fround(0.46);
const hamming: Filter = {
  weight(x) {
    if (x < 0) x = -x;
    if (x === 0) return 1;
    if (x >= 1) return 0;
    x = x * Math.PI;
    return (Math.sin(x) / x) * (HAMMING_A + HAMMING_B * Math.cos(x));
  },
  support: 1,
};

// Keys' cubic convolution with a = -0.5, written in Pillow's order of operations.
const A = -0.5;
const bicubic: Filter = {
  weight(x) {
    if (x < 0) x = -x;
    if (x < 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
    if (x < 2) return (((x - 5) * x + 8) * x - 4) * A;
    return 0;
  },
  support: 2,
};

function sinc(x: number): number {
  if (x === 0) return 1;
  x = x * Math.PI;
  return Math.sin(x) / x;
}

const lanczos: Filter = {
  weight: (x) => (-3 <= x && x < 3 ? sinc(x) * sinc(x / 3) : 0),
  support: 3,
};

const filters: Record<Exclude<Resample, 'nearest'>, Filter> = { box, bilinear, hamming, bicubic, lanczos };

/** 8 bits of result, 2 for the overflow of negative lobes and sums over 1: the rest is the fraction. */
const PRECISION_BITS = 32 - 8 - 2;
const HALF = 1 << (PRECISION_BITS - 1);
const ONE = 1 << PRECISION_BITS;

/** For each output pixel along one axis: its first input pixel, how many it reads, and their weights. */
export interface Coefficients {
  /** Weights per output pixel (a stride of `ksize`), fixed point with PRECISION_BITS fraction bits. */
  weights: Int32Array;
  /** [first, count] per output pixel. */
  bounds: Int32Array;
  ksize: number;
}

/**
 * Pillow's `precompute_coeffs` for the box [0, inSize) followed by `normalize_coeffs_8bpc`. The
 * box ends are C floats in Pillow; sizes are integers below 2^24, so they are exact as doubles.
 */
export function coefficients(inSize: number, outSize: number, filter: Filter): Coefficients {
  const scale = inSize / outSize;
  const filterscale = scale < 1 ? 1 : scale;
  const support = filter.support * filterscale;
  const ksize = Math.ceil(support) * 2 + 1;
  const weights = new Int32Array(outSize * ksize);
  const bounds = new Int32Array(outSize * 2);
  const row = new Float64Array(ksize);
  const ss = 1 / filterscale;
  for (let xx = 0; xx < outSize; xx++) {
    const center = (xx + 0.5) * scale;
    // (int) in C truncates toward zero; a negative start is clamped to 0 either way.
    let xmin = Math.trunc(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    let xmax = Math.trunc(center + support + 0.5);
    if (xmax > inSize) xmax = inSize;
    xmax -= xmin;
    let ww = 0;
    for (let x = 0; x < xmax; x++) {
      const w = filter.weight((x + xmin - center + 0.5) * ss);
      row[x] = w;
      ww += w;
    }
    const base = xx * ksize;
    for (let x = 0; x < xmax; x++) {
      const k = ww !== 0 ? row[x]! / ww : row[x]!;
      weights[base + x] = k < 0 ? Math.trunc(-0.5 + k * ONE) : Math.trunc(0.5 + k * ONE);
    }
    bounds[xx * 2] = xmin;
    bounds[xx * 2 + 1] = xmax;
  }
  return { weights, bounds, ksize };
}

/*
 * The passes write through Uint8ClampedArray views: storing `sum >> PRECISION_BITS` there clamps it to
 * 0..255, which is Pillow's clip8 (its table covers every sum a filter can reach). Sums stay within
 * int32 as in Pillow's C (`| 0` tells V8 so).
 */

/**
 * Rows [firstRow, firstRow + rows) of `image`, each resampled along x into `dst` (outWidth x rows).
 * Two rows at a time share each weight's load; the sums are Pillow's, row by row.
 */
function horizontalPass(
  image: RgbImage,
  firstRow: number,
  rows: number,
  dst: Uint8ClampedArray,
  outWidth: number,
  c: Coefficients,
): void {
  const { weights, bounds, ksize } = c;
  const src = image.data;
  const inStride = image.width * 3;
  const outStride = outWidth * 3;
  let yy = 0;
  for (; yy + 1 < rows; yy += 2) {
    const rowStart = (yy + firstRow) * inStride;
    let o = yy * outStride;
    for (let xx = 0; xx < outWidth; xx++, o += 3) {
      let p = rowStart + bounds[xx * 2]! * 3;
      let k = xx * ksize;
      const end = k + bounds[xx * 2 + 1]!;
      let s0 = HALF;
      let s1 = HALF;
      let s2 = HALF;
      let t0 = HALF;
      let t1 = HALF;
      let t2 = HALF;
      for (; k < end; k++, p += 3) {
        const w = weights[k]!;
        const q = p + inStride;
        s0 = (s0 + src[p]! * w) | 0;
        s1 = (s1 + src[p + 1]! * w) | 0;
        s2 = (s2 + src[p + 2]! * w) | 0;
        t0 = (t0 + src[q]! * w) | 0;
        t1 = (t1 + src[q + 1]! * w) | 0;
        t2 = (t2 + src[q + 2]! * w) | 0;
      }
      dst[o] = s0 >> PRECISION_BITS;
      dst[o + 1] = s1 >> PRECISION_BITS;
      dst[o + 2] = s2 >> PRECISION_BITS;
      dst[o + outStride] = t0 >> PRECISION_BITS;
      dst[o + outStride + 1] = t1 >> PRECISION_BITS;
      dst[o + outStride + 2] = t2 >> PRECISION_BITS;
    }
  }
  if (yy < rows) {
    const rowStart = (yy + firstRow) * inStride;
    let o = yy * outStride;
    for (let xx = 0; xx < outWidth; xx++) {
      let p = rowStart + bounds[xx * 2]! * 3;
      let k = xx * ksize;
      const end = k + bounds[xx * 2 + 1]!;
      let s0 = HALF;
      let s1 = HALF;
      let s2 = HALF;
      for (; k < end; k++, p += 3) {
        const w = weights[k]!;
        s0 = (s0 + src[p]! * w) | 0;
        s1 = (s1 + src[p + 1]! * w) | 0;
        s2 = (s2 + src[p + 2]! * w) | 0;
      }
      dst[o++] = s0 >> PRECISION_BITS;
      dst[o++] = s1 >> PRECISION_BITS;
      dst[o++] = s2 >> PRECISION_BITS;
    }
  }
}

/**
 * Each output row from the rows its weights cover. Pillow sums per pixel over the taps; summing per
 * tap over the row gives the same integers and reads memory in order.
 */
function verticalPass(src: Uint8Array, width: number, dst: Uint8ClampedArray, height: number, c: Coefficients): void {
  const { weights, bounds, ksize } = c;
  const stride = width * 3;
  const sums = new Int32Array(stride);
  for (let yy = 0; yy < height; yy++) {
    const first = bounds[yy * 2]!;
    const count = bounds[yy * 2 + 1]!;
    sums.fill(HALF);
    for (let y = 0; y < count; y++) {
      const w = weights[yy * ksize + y]!;
      if (w === 0) continue;
      const rowStart = (first + y) * stride;
      for (let i = 0; i < stride; i++) sums[i] = (sums[i]! + src[rowStart + i]! * w) | 0;
    }
    const o = yy * stride;
    for (let i = 0; i < stride; i++) dst[o + i] = sums[i]! >> PRECISION_BITS;
  }
}

/**
 * Pillow's NEAREST resize (ImagingScaleAffine): source coordinates stepped in doubles, accumulated
 * as Pillow accumulates them, truncated; a pixel that would fall outside stays 0 (Pillow's fill).
 */
function nearest(image: RgbImage, width: number, height: number): RgbImage {
  const out = new Uint8Array(width * height * 3);
  const a0 = image.width / width;
  const a4 = image.height / height;
  const columns = new Int32Array(width);
  let xo = a0 * 0.5;
  for (let x = 0; x < width; x++) {
    const xin = xo < 0 ? -1 : Math.trunc(xo);
    columns[x] = xin < image.width ? xin : -1;
    xo += a0;
  }
  let yo = a4 * 0.5;
  const src = image.data;
  for (let y = 0; y < height; y++) {
    const yin = yo < 0 ? -1 : Math.trunc(yo);
    yo += a4;
    if (yin < 0 || yin >= image.height) continue;
    const row = yin * image.width * 3;
    let o = y * width * 3;
    for (let x = 0; x < width; x++, o += 3) {
      const column = columns[x]!;
      if (column < 0) continue;
      const p = row + column * 3;
      out[o] = src[p]!;
      out[o + 1] = src[p + 1]!;
      out[o + 2] = src[p + 2]!;
    }
  }
  return { data: out, width, height };
}

/**
 * `image` resized to width x height exactly as Pillow's `Image.resize((width, height), resample)`
 * resizes an RGB image. `kernels`: the WebAssembly SIMD passes where the runtime has them (the
 * default), or the scalar ones; both give the same bytes.
 */
export function resizeRgb(
  image: RgbImage,
  width: number,
  height: number,
  resample: Resample,
  kernels: 'simd' | 'scalar' = 'simd',
): RgbImage {
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 1 || height < 1)
    throw new RangeError(`can not resize to ${width}x${height}`);
  if (image.data.length !== image.width * image.height * 3)
    throw new RangeError(
      `${image.width}x${image.height} RGB needs ${image.width * image.height * 3} bytes, got ${image.data.length}`,
    );
  if (width === image.width && height === image.height) return { data: image.data.slice(), width, height };
  if (resample === 'nearest') return nearest(image, width, height);

  const filter = filters[resample];
  const horizontal = coefficients(image.width, width, filter);
  const vertical = coefficients(image.height, height, filter);
  const needHorizontal = width !== image.width;
  const needVertical = height !== image.height;
  // Only the rows the vertical pass reads: from the first output row's first tap to the last one's last.
  const firstRow = needHorizontal ? vertical.bounds[0]! : 0;
  const rows = needHorizontal ? vertical.bounds[height * 2 - 2]! + vertical.bounds[height * 2 - 1]! - firstRow : 0;
  if (firstRow > 0) for (let i = 0; i < height; i++) vertical.bounds[i * 2] = vertical.bounds[i * 2]! - firstRow;

  const simd = kernels === 'simd' ? resizeSimd(image, width, height, horizontal, vertical, firstRow, rows) : undefined;
  if (simd) return simd;

  let current = image;
  if (needHorizontal) {
    const temp = new Uint8ClampedArray(width * rows * 3);
    horizontalPass(image, firstRow, rows, temp, width, horizontal);
    current = { data: new Uint8Array(temp.buffer), width, height: rows };
  }
  if (needVertical) {
    const out = new Uint8ClampedArray(width * height * 3);
    verticalPass(current.data, width, out, height, vertical);
    current = { data: new Uint8Array(out.buffer), width, height };
  }
  return current;
}

/**
 * The same two passes in WebAssembly SIMD (resample-simd.ts), or undefined where it is not
 * available. Both passes run in the kernels' memory: the image is copied in, the result out.
 */
function resizeSimd(
  image: RgbImage,
  width: number,
  height: number,
  horizontal: Coefficients,
  vertical: Coefficients,
  firstRow: number,
  rows: number,
): RgbImage | undefined {
  const needHorizontal = width !== image.width;
  const needVertical = height !== image.height;
  const inBytes = image.data.length;
  const tempBytes = needHorizontal && needVertical ? width * rows * 3 : 0;
  const outBytes = width * height * 3;
  const coefficientBytes = (c: Coefficients) => c.weights.byteLength + c.bounds.byteLength;
  // Padding: the kernels read and write whole vectors past a buffer's last pixel.
  const total = inBytes + tempBytes + outBytes + coefficientBytes(horizontal) + coefficientBytes(vertical) + 8 * 32;
  const kernels = simdKernels(total);
  if (!kernels) return undefined;
  const alloc = arena(kernels);
  const heap = new Uint8Array(kernels.memory.buffer);
  const put = (data: Int32Array | Uint8Array) => {
    const at = alloc(data.byteLength + 16);
    heap.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), at);
    return at;
  };
  const src = put(image.data);
  const out = alloc(outBytes + 16);
  let current = src;
  let currentWidth = image.width;
  if (needHorizontal) {
    const dst = needVertical ? alloc(tempBytes + 16) : out;
    const start = src + firstRow * image.width * 3;
    kernels.horizontal(
      start,
      image.width * 3,
      rows,
      dst,
      width,
      put(horizontal.weights),
      put(horizontal.bounds),
      horizontal.ksize,
    );
    current = dst;
    currentWidth = width;
  }
  if (needVertical)
    kernels.vertical(
      current,
      currentWidth * 3,
      height,
      out,
      put(vertical.weights),
      put(vertical.bounds),
      vertical.ksize,
    );
  return { data: heap.slice(out, out + outBytes), width, height };
}
