/**
 * Super-resolution: upscale to a target size with a model that multiplies each edge by its scale.
 *
 * Passes run while one more pass would still not reach the target; the last pass gets an input no
 * larger than needed for an output of at most twice the target edge (and within the pixel limit),
 * so cost and memory follow the requested size, not the input's; lanczos3 makes the exact size.
 * RGB models see the colour; luma models (ESPCN) see only Y, and Cb/Cr are upscaled bicubically.
 */
import type { ServedImageModel } from '../models/image-catalogue.js';
import type { ImagesContext } from './context.js';
import type { Size } from './options.js';
import { fromYCbCr, resize, toYCbCr, type Raster } from './raster.js';
import { runTiled, throwIfAborted } from './tiles.js';

export interface SuperResolveOptions {
  overlap: number;
  signal?: AbortSignal;
}

export interface SuperResolved {
  image: Raster;
  /** Sizes the model ran on, one per pass. */
  passes: Size[];
  tiles: number;
  inferenceMs: number;
}

/** Scales the model can not reach in one pass: how much the target is larger than `image`. */
function factor(image: Size, target: Size): number {
  return Math.max(target.width / image.width, target.height / image.height);
}

/** `image` is cropped to the target's aspect ratio already. */
export async function superResolve(
  context: ImagesContext,
  model: ServedImageModel,
  image: Raster,
  target: Size,
  options: SuperResolveOptions,
): Promise<SuperResolved> {
  const { scale } = model.manifest;
  const passes: Size[] = [];
  let tiles = 0;
  let inferenceMs = 0;
  let current = image;
  const pass = async (input: Raster) => {
    throwIfAborted(options.signal);
    passes.push({ width: input.width, height: input.height });
    const result = await runPass(context, model, input, options);
    tiles += result.tiles;
    inferenceMs += result.inferenceMs;
    return result.image;
  };

  while (factor(current, target) > scale) current = await pass(current);
  if (factor(current, target) > 1) {
    // The last pass: never more than twice the target edge out, nor over the pixel limit.
    const limit = Math.min(
      1,
      (2 * target.width) / (current.width * scale),
      (2 * target.height) / (current.height * scale),
      Math.sqrt(context.limits.maxPixels / (current.width * current.height * scale * scale)),
    );
    const width = Math.max(Math.ceil(target.width / scale), Math.round(current.width * limit));
    const height = Math.max(Math.ceil(target.height / scale), Math.round(current.height * limit));
    current = await pass(await resize(current, width, height));
  }
  throwIfAborted(options.signal);
  return { image: await resize(current, target.width, target.height), passes, tiles, inferenceMs };
}

async function runPass(context: ImagesContext, model: ServedImageModel, image: Raster, options: SuperResolveOptions) {
  const { manifest } = model;
  const fixed = manifest.input.size;
  const edge = manifest.tile?.size ?? Math.max(image.width, image.height);
  const tile = fixed ? { width: fixed[1], height: fixed[0] } : { width: edge, height: edge };
  const run = {
    model: model.id,
    scale: manifest.scale,
    tile,
    overlap: options.overlap,
    fixed: fixed !== undefined,
    signal: options.signal,
  };
  if (manifest.input.channels === 'rgb') return runTiled(context.lane, image, run);

  const { y } = toYCbCr(image);
  const result = await runTiled(context.lane, y, run);
  // Colour carries little detail: a bicubic upscale of it is what the luma model was trained beside.
  const colour = toYCbCr(await resize(image, result.image.width, result.image.height, 'cubic'));
  return { ...result, image: fromYCbCr(result.image, colour.cb, colour.cr) };
}
