/**
 * Style transfer: the image is stylised at the model's working size (its long edge, from the
 * manifest: brush strokes have a fixed size in the model's pixels, so a fixed working size keeps
 * the look the same whatever the input's size), in overlapping tiles of the graph's fixed size,
 * then brought to the requested size with lanczos3.
 *
 * Style networks normalise each tile on its own (instance normalisation), so tiles of similar
 * content can come out in different tints. One extra run on the whole image shrunk to the graph's
 * size gives each region's overall colour, and each tile is shifted to the colour of its region.
 */
import type { ServedImageModel } from '../models/image-catalogue.js';
import type { ImagesContext } from './context.js';
import type { Size } from './options.js';
import { resize, type Raster } from './raster.js';
import { runTiled, throwIfAborted } from './tiles.js';

export interface Stylised {
  image: Raster;
  working: Size;
  tiles: number;
  inferenceMs: number;
}

/** Stylising a larger image than this costs time without showing more of the style. */
const defaultWorkingEdge = 1024;

/** `image` is cropped to the target's aspect ratio already. */
export async function stylise(
  context: ImagesContext,
  model: ServedImageModel,
  image: Raster,
  target: Size,
  options: { overlap: number; signal?: AbortSignal },
): Promise<Stylised> {
  const { manifest } = model;
  const edge = manifest.workingEdge ?? defaultWorkingEdge;
  const ratio = edge / Math.max(image.width, image.height);
  const working = {
    width: Math.max(1, Math.round(image.width * ratio)),
    height: Math.max(1, Math.round(image.height * ratio)),
  };
  const fixed = manifest.input.size;
  const tileEdge = manifest.tile?.size ?? edge;
  const tile = fixed ? { width: fixed[1], height: fixed[0] } : { width: tileEdge, height: tileEdge };
  const input = await resize(image, working.width, working.height);
  throwIfAborted(options.signal);
  const several = input.width > tile.width || input.height > tile.height;
  const overview = fixed && several ? await overviewOf(context, model, input, tile) : undefined;
  const adjust = overview
    ? (at: { x: number; y: number; width: number; height: number }, output: Float32Array, channels: number) =>
        shiftToRegion(overview, at, output, channels)
    : undefined;
  const result = await runTiled(context.lane, input, {
    model: model.id,
    scale: manifest.scale,
    tile,
    overlap: options.overlap,
    fixed: fixed !== undefined,
    signal: options.signal,
    adjust,
  });
  throwIfAborted(options.signal);
  const tiles = result.tiles + (overview ? 1 : 0);
  return {
    image: await resize(result.image, target.width, target.height),
    working,
    tiles,
    inferenceMs: result.inferenceMs + (overview?.inferenceMs ?? 0),
  };
}

/** The whole image stylised in one run at the graph's size, resized back to the working size. */
async function overviewOf(
  context: ImagesContext,
  model: ServedImageModel,
  input: Raster,
  tile: { width: number; height: number },
) {
  const small = await resize(input, tile.width, tile.height, 'linear');
  const result = await context.lane.run({
    kind: 'image',
    model: model.id,
    pixels: new Uint8Array(small.data),
    width: tile.width,
    height: tile.height,
    channels: 3,
  });
  const pixels = Uint8Array.from(result.pixels, (v) => Math.round(v));
  const image = await resize(
    { data: pixels, width: result.width, height: result.height, channels: result.channels as Raster['channels'] },
    input.width,
    input.height,
    'linear',
  );
  return { image, inferenceMs: result.inferenceMs };
}

/** Shifts each channel of a tile's output so its mean is that of the same region of the overview. */
function shiftToRegion(
  overview: { image: Raster },
  at: { x: number; y: number; width: number; height: number },
  output: Float32Array,
  channels: number,
): void {
  const reference = overview.image;
  if (reference.channels !== channels) return;
  const width = Math.min(at.width, reference.width - at.x);
  const height = Math.min(at.height, reference.height - at.y);
  const tileSum = new Float64Array(channels);
  const referenceSum = new Float64Array(channels);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const t = (y * at.width + x) * channels;
      const r = ((at.y + y) * reference.width + at.x + x) * channels;
      for (let c = 0; c < channels; c++) {
        tileSum[c]! += output[t + c]!;
        referenceSum[c]! += reference.data[r + c]!;
      }
    }
  }
  const count = width * height;
  for (let c = 0; c < channels; c++) {
    const shift = (referenceSum[c]! - tileSum[c]!) / count;
    for (let i = c; i < output.length; i += channels) output[i]! += shift;
  }
}
