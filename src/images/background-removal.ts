/**
 * Background removal: the model sees the whole image at its input size (ISNet: 1024x1024) and
 * returns an alpha matte, which is resized back to the image. The cut-out keeps the image's own
 * alpha too (a pixel is as transparent as either says).
 */
import type { ServedImageModel } from '../models/image-catalogue.js';
import type { ImagesContext } from './context.js';
import { resize, type Raster } from './raster.js';
import { throwIfAborted } from './tiles.js';

export interface Matte {
  alpha: Raster;
  inferenceMs: number;
}

/** The foreground alpha of `image` (RGB), at the image's size. */
export async function alphaMatte(
  context: ImagesContext,
  model: ServedImageModel,
  image: Raster,
  signal?: AbortSignal,
): Promise<Matte> {
  const [height, width] = model.manifest.input.size ?? fitSide(image, 1024);
  const input = await resize(image, width, height, 'linear');
  throwIfAborted(signal);
  // A fresh array: the lane transfers its buffer to the worker.
  const pixels = new Uint8Array(input.data);
  const result = await context.lane.run({ kind: 'image', model: model.id, pixels, width, height, channels: 3 });
  if (result.channels !== 1 || result.width !== width || result.height !== height) {
    throw new Error(
      `The image model "${model.id}" returned ${result.width}x${result.height}x${result.channels}; a matte of ${width}x${height}x1 was expected.`,
    );
  }
  const matte = Uint8Array.from(result.pixels, (v) => Math.round(v));
  const alpha = await resize({ data: matte, width, height, channels: 1 }, image.width, image.height, 'linear');
  return { alpha, inferenceMs: result.inferenceMs };
}

/** A dynamic-size matting model runs at the image's size, its long edge at most `edge`. */
function fitSide(image: Raster, edge: number): [number, number] {
  const ratio = Math.min(1, edge / Math.max(image.width, image.height));
  return [Math.max(1, Math.round(image.height * ratio)), Math.max(1, Math.round(image.width * ratio))];
}

/** Multiplies two alpha planes (both 0..255). */
export function multiplyAlpha(a: Raster, b: Raster): Raster {
  const data = new Uint8Array(a.data.length);
  for (let i = 0; i < data.length; i++) data[i] = Math.round((a.data[i]! * b.data[i]!) / 255);
  return { ...a, data };
}
