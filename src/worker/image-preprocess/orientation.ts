/**
 * An EXIF orientation applied to decoded RGB pixels, as `ImageOps.exif_transpose` applies it with
 * Pillow's `transpose`: flips and quarter turns move whole pixels, so the result is exact.
 */
import type { Orientation } from './exif.js';
import type { RgbImage } from './resample.js';

/**
 * The upright image of one stored with `orientation`: 2 mirrored, 3 turned half way, 4 flipped,
 * 5 transposed, 6 turned a quarter clockwise, 7 transversed, 8 a quarter anticlockwise.
 */
export function applyOrientation(image: RgbImage, orientation: Orientation): RgbImage {
  if (orientation === 1) return image;
  const { data, width: w, height: h } = image;
  const swaps = orientation >= 5;
  const width = swaps ? h : w;
  const height = swaps ? w : h;
  const out = new Uint8Array(data.length);
  // For each output pixel (x, y), the stored pixel it comes from: sx + sy * w, as steps along x and y.
  let origin: number;
  let stepX: number;
  let stepY: number;
  switch (orientation) {
    case 2:
      [origin, stepX, stepY] = [w - 1, -1, w];
      break;
    case 3:
      [origin, stepX, stepY] = [w * h - 1, -1, -w];
      break;
    case 4:
      [origin, stepX, stepY] = [(h - 1) * w, 1, -w];
      break;
    case 5:
      [origin, stepX, stepY] = [0, w, 1];
      break;
    case 6:
      [origin, stepX, stepY] = [(h - 1) * w, -w, 1];
      break;
    case 7:
      [origin, stepX, stepY] = [w * h - 1, -w, -1];
      break;
    case 8:
      [origin, stepX, stepY] = [w - 1, w, -1];
      break;
  }
  for (let y = 0, o = 0; y < height; y++) {
    for (let x = 0, s = origin + y * stepY; x < width; x++, s += stepX, o += 3) {
      const i = s * 3;
      out[o] = data[i]!;
      out[o + 1] = data[i + 1]!;
      out[o + 2] = data[i + 2]!;
    }
  }
  return { data: out, width, height };
}
