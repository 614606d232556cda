/**
 * An encoded image to an image embedder's pixel_values, exactly as transformers' (Pillow) image
 * processors compute them: decode (decode.ts), resize (resample.ts, Pillow's resampling), center
 * crop, rescale and normalise (normalize.ts). Runs in worker threads: decoding and resampling are
 * CPU work that must not hold the main thread.
 */
import type { ImageProcessorSpec, Resample } from '../../models/image-processor.js';
import { decodeRgb } from './decode.js';
import { channelTable, writePixelValues } from './normalize.js';
import { resizeRgb, type RgbImage } from './resample.js';

export { decodeRgb, ImageDecodeError } from './decode.js';
export { resizeRgb, type RgbImage } from './resample.js';

/** The size a resize gives an image of `width` x `height`, as transformers' get_resize_output_image_size computes it. */
export function resizedSize(
  resize: NonNullable<ImageProcessorSpec['resize']>,
  width: number,
  height: number,
): { width: number; height: number } {
  if ('height' in resize) return { width: resize.width, height: resize.height };
  const size = resize.shortestEdge;
  // int(size * long / short): Python's true division in double, then truncation.
  if (width <= height) return { width: size, height: Math.trunc((size * height) / width) };
  return { width: Math.trunc((size * width) / height), height: size };
}

const tables = new WeakMap<ImageProcessorSpec, [Float32Array, Float32Array, Float32Array]>();

/** The three channels' byte -> float tables of a spec, made once per spec object. */
function tablesOf(spec: ImageProcessorSpec): [Float32Array, Float32Array, Float32Array] {
  let made = tables.get(spec);
  if (!made) {
    made = [channelTable(spec, 0), channelTable(spec, 1), channelTable(spec, 2)];
    tables.set(spec, made);
  }
  return made;
}

/** The spec's resize of an upright RGB image (itself when the spec does not resize). */
export function resizeForSpec(image: RgbImage, spec: ImageProcessorSpec, resample: Resample = spec.resample): RgbImage {
  if (!spec.resize) return image;
  const { width, height } = resizedSize(spec.resize, image.width, image.height);
  // Pillow returns a copy at the same size; the pixels are the same without one.
  if (width === image.width && height === image.height) return image;
  return resizeRgb(image, width, height, resample);
}

/** Decodes PNG / JPEG / WebP bytes and writes the image's pixel_values (CHW float32, spec.height x spec.width) into `out` from `offset`. */
export async function preprocessInto(
  bytes: Uint8Array,
  spec: ImageProcessorSpec,
  out: Float32Array,
  offset: number,
  maxPixels: number,
): Promise<void> {
  const image = await decodeRgb(bytes, maxPixels);
  writePixelValues(resizeForSpec(image, spec), spec, tablesOf(spec), out, offset);
}
