/**
 * The request options of an image edit that are not about the pipeline: sizes and their limits,
 * and what `quality` changes.
 */
import { invalid } from '../errors.js';
import type { ImageLimits } from './context.js';
import type { OutputFormat } from './raster.js';

export type Quality = 'low' | 'medium' | 'high' | 'auto';
export type Background = 'transparent' | 'opaque' | 'auto';

export interface Size {
  width: number;
  height: number;
}

export function formatSize(size: Size): string {
  return `${size.width}x${size.height}`;
}

/** "WxH" within the limits, or "auto" (absent means auto). */
export function parseSize(value: string | undefined, limits: ImageLimits): Size | 'auto' {
  if (value === undefined || value === 'auto') return 'auto';
  const match = /^(\d{1,6})x(\d{1,6})$/.exec(value.trim());
  if (!match)
    throw invalid('size', `size must be "WIDTHxHEIGHT" (such as 2048x2048 or 3840x2160) or "auto"; got "${value}".`);
  const width = Number(match[1]);
  const height = Number(match[2]);
  if (width < 1 || height < 1) throw invalid('size', `size ${value} has an empty side.`);
  if (Math.max(width, height) > limits.maxEdge)
    throw invalid('size', `size ${value} is over the longest edge this server makes, ${limits.maxEdge} pixels.`);
  if (width * height > limits.maxPixels)
    throw invalid(
      'size',
      `size ${value} is ${width * height} pixels, over this server's limit of ${limits.maxPixels}.`,
    );
  return { width, height };
}

/** The largest size with this aspect ratio that fits the limits (the size itself if it fits). */
export function fitWithin(size: Size, limits: ImageLimits): Size {
  const byEdge = limits.maxEdge / Math.max(size.width, size.height);
  const byPixels = Math.sqrt(limits.maxPixels / (size.width * size.height));
  const factor = Math.min(1, byEdge, byPixels);
  if (factor >= 1) return size;
  return { width: Math.max(1, Math.floor(size.width * factor)), height: Math.max(1, Math.floor(size.height * factor)) };
}

/** What `auto` quality means. */
export function effectiveQuality(quality: Quality): Exclude<Quality, 'auto'> {
  return quality === 'auto' ? 'medium' : quality;
}

/** Tile overlap for a quality: wider overlaps blend seams over more pixels and cost more tiles. */
export function overlapFor(quality: Exclude<Quality, 'auto'>, overlap: number, tile: number): number {
  const wanted = quality === 'low' ? Math.round(overlap / 2) : quality === 'high' ? overlap * 2 : overlap;
  return Math.min(wanted, Math.floor((tile - 1) / 2));
}

export interface EncoderSettings {
  format: OutputFormat;
  quality: number;
  pngLevel: number;
}

/** JPEG/WebP quality is `output_compression` when given, else set by `quality`; PNG is lossless at every quality (only its zlib effort changes). */
export function encoderSettings(
  quality: Exclude<Quality, 'auto'>,
  format: OutputFormat,
  compression: number | undefined,
): EncoderSettings {
  const lossy = { low: 70, medium: 85, high: 95 }[quality];
  const pngLevel = { low: 1, medium: 3, high: 6 }[quality];
  return { format, quality: compression ?? lossy, pngLevel };
}
