/**
 * The steps after the resize, as transformers computes them: the center crop, then rescale
 * (`image.astype(float64) * scale`, stored as float32) and normalise (`(image - mean) / std` in
 * float32, mean and std made float32 first), written channel-first into the pixel_values.
 *
 * Every step is a function of one byte per channel, so each channel is a table of 256 floats built
 * with the same operations in the same precision (Math.fround after each float32 operation: an
 * operation on two float32 values rounded once more to float32 is the float32 operation).
 */
import type { ImageProcessorSpec } from '../../models/image-processor.js';
import type { RgbImage } from './resample.js';

/** The float32 value of each byte 0..255 of channel `channel` after rescale and normalise. */
export function channelTable(spec: ImageProcessorSpec, channel: 0 | 1 | 2): Float32Array {
  const table = new Float32Array(256);
  const mean = spec.mean === undefined ? undefined : Math.fround(spec.mean[channel]);
  const std = spec.std === undefined ? undefined : Math.fround(spec.std[channel]);
  for (let byte = 0; byte < 256; byte++) {
    let value = spec.rescale === undefined ? byte : Math.fround(byte * spec.rescale);
    if (mean !== undefined) value = Math.fround(value - mean);
    if (std !== undefined) value = Math.fround(value / std);
    table[byte] = value;
  }
  return table;
}

/** Python's round() of a half-integer or integer: halves go to the even neighbour. */
function roundHalfEven(value: number): number {
  const floor = Math.floor(value);
  const fraction = value - floor;
  if (fraction !== 0.5) return Math.round(value);
  return floor % 2 === 0 ? floor : floor + 1;
}

/** The top-left corner of the spec's center crop in an image of `width` x `height`. */
export function cropOrigin(spec: ImageProcessorSpec, width: number, height: number): { top: number; left: number } {
  const crop = spec.crop;
  if (!crop) return { top: 0, left: 0 };
  if (crop.height > height || crop.width > width)
    throw new RangeError(`a ${crop.width}x${crop.height} crop does not fit in ${width}x${height}`);
  if (crop.offsets === 'round-half-even')
    return { top: roundHalfEven((height - crop.height) / 2), left: roundHalfEven((width - crop.width) / 2) };
  return { top: Math.floor((height - crop.height) / 2), left: Math.floor((width - crop.width) / 2) };
}

/**
 * Crops `image` (already resized) as the spec says and writes its pixel_values, 3 planes of
 * spec.height x spec.width, into `out` from `offset`. `tables` are the three channelTable()s.
 */
export function writePixelValues(
  image: RgbImage,
  spec: ImageProcessorSpec,
  tables: readonly [Float32Array, Float32Array, Float32Array],
  out: Float32Array,
  offset: number,
): void {
  const { top, left } = cropOrigin(spec, image.width, image.height);
  const { width, height } = spec;
  if (!spec.crop && (image.width !== width || image.height !== height))
    throw new RangeError(`the image is ${image.width}x${image.height}, the pixel values ${width}x${height}`);
  const plane = width * height;
  if (offset < 0 || offset + 3 * plane > out.length)
    throw new RangeError(`pixel values of ${3 * plane} floats do not fit at ${offset} in ${out.length}`);
  const [red, green, blue] = tables;
  const src = image.data;
  const stride = image.width * 3;
  let r = offset;
  let g = offset + plane;
  let b = offset + 2 * plane;
  for (let y = 0; y < height; y++) {
    let p = (top + y) * stride + left * 3;
    for (let x = 0; x < width; x++, p += 3) {
      out[r++] = red[src[p]!]!;
      out[g++] = green[src[p + 1]!]!;
      out[b++] = blue[src[p + 2]!]!;
    }
  }
}
