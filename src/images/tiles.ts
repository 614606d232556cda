/**
 * Runs a model over an image tile by tile in the image lane and blends the outputs (tiling.ts).
 * A request keeps at most one tile more in flight than the lane has threads, so concurrent edits
 * take turns on the threads and a large image never floods the lane's queue.
 */
import { ApiError } from '../errors.js';
import type { ImageTaskRunner } from '../engine/image-pool.js';
import type { Raster } from './raster.js';
import { extractTile, tileSpans, TileBlender } from './tiling.js';

export interface TiledRun {
  model: string;
  /** Output edge / input edge. */
  scale: number;
  /** Tile width and height in input pixels. */
  tile: { width: number; height: number };
  overlap: number;
  /** The graph takes only tile-sized inputs (small images are padded up to a tile). */
  fixed: boolean;
  signal?: AbortSignal;
  /** Changes a tile's output before it is blended (in place); `x`, `y` are the tile's input position. */
  adjust?: (
    tile: { x: number; y: number; width: number; height: number },
    output: Float32Array,
    channels: number,
  ) => void;
}

export interface TiledResult {
  image: Raster;
  tiles: number;
  inferenceMs: number;
}

export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new ApiError('client_closed');
}

export async function runTiled(lane: ImageTaskRunner, image: Raster, run: TiledRun): Promise<TiledResult> {
  const channels = image.channels;
  if (channels !== 1 && channels !== 3) throw new Error(`tiles take 1 or 3 channels, not ${channels}`);
  const xSpans = tileSpans(image.width, run.tile.width, run.overlap, run.fixed);
  const ySpans = tileSpans(image.height, run.tile.height, run.overlap, run.fixed);
  const tiles: { i: number; j: number }[] = [];
  for (let j = 0; j < ySpans.length; j++) for (let i = 0; i < xSpans.length; i++) tiles.push({ i, j });

  let blender: TileBlender | undefined;
  let next = 0;
  let failed = false;
  let inferenceMs = 0;
  const worker = async () => {
    while (next < tiles.length && !failed) {
      throwIfAborted(run.signal);
      const { i, j } = tiles[next++]!;
      const x = xSpans[i]!;
      const y = ySpans[j]!;
      const width = x.end - x.start;
      const height = y.end - y.start;
      const pixels = extractTile(
        image.data,
        image.width,
        image.height,
        image.channels,
        x.start,
        y.start,
        width,
        height,
      );
      const result = await lane.run({ kind: 'image', model: run.model, pixels, width, height, channels });
      if (result.width !== width * run.scale || result.height !== height * run.scale) {
        throw new ApiError(
          'internal',
          `The image model "${run.model}" returned ${result.width}x${result.height} for a ${width}x${height} tile; its manifest says x${run.scale}.`,
          { permanent: true },
        );
      }
      run.adjust?.({ x: x.start, y: y.start, width, height }, result.pixels, result.channels);
      blender ??= new TileBlender(
        image.width * run.scale,
        image.height * run.scale,
        result.channels,
        xSpans,
        ySpans,
        run.scale,
      );
      blender.add(i, j, result.pixels);
      inferenceMs += result.inferenceMs;
    }
  };
  const workers = Array.from({ length: Math.min(tiles.length, lane.threads + 1) }, () =>
    worker().catch((error: unknown) => {
      failed = true;
      throw error;
    }),
  );
  await Promise.all(workers);
  const out = blender!;
  return {
    image: { data: out.pixels, width: out.width, height: out.height, channels: out.channels as Raster['channels'] },
    tiles: tiles.length,
    inferenceMs,
  };
}
