/**
 * Raw 8-bit images and what is done to them outside the models: decoding (with a pixel limit and
 * EXIF orientation), resizing, cropping, alpha and luma planes, encoding. sharp (libvips) does the
 * heavy work on its own threads, off the event loop.
 */
import type { KernelEnum, Metadata, Sharp } from 'sharp';
import { ApiError } from '../errors.js';
import sharp from '../libvips.js';

export interface Raster {
  /** height x width x channels, row-major. */
  data: Uint8Array;
  width: number;
  height: number;
  channels: 1 | 2 | 3 | 4;
}

export type OutputFormat = 'png' | 'jpeg' | 'webp';

export interface DecodedImage {
  /** Colour, sRGB, upright (EXIF orientation applied). */
  rgb: Raster;
  /** The image's own alpha channel, if it has one that is not fully opaque. */
  alpha?: Raster;
  /** The encoded format, as sharp names it (png, jpeg, webp, gif, tiff, avif, heif, ...). */
  format: string;
}

function invalidImage(index: number, why: string): ApiError {
  return new ApiError('invalid_image', `image[${index}] ${why}`, { param: `image[${index}]` });
}

/** The input formats decoded: libvips reads many more (SVG, TIFF, PDF, HEIF, ...), each one more parser to attack. */
const inputFormats = ['png', 'jpeg', 'webp'];

/** An encoded image's format from its first bytes (its magic number), as sharp names it; undefined when unknown. */
export function sniffFormat(bytes: Uint8Array): string | undefined {
  const ascii = (from: number, to: number) => Buffer.from(bytes.subarray(from, to)).toString('latin1');
  if (bytes[0] === 0x89 && ascii(1, 4) === 'PNG') return 'png';
  if (bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'jpeg';
  if (ascii(0, 4) === 'RIFF' && ascii(8, 12) === 'WEBP') return 'webp';
  if (ascii(0, 4) === 'GIF8') return 'gif';
  if (ascii(0, 4) === 'II*\0' || ascii(0, 4) === 'MM\0*') return 'tiff';
  if (ascii(4, 8) === 'ftyp') return /^(avi[fs])/.test(ascii(8, 12)) ? 'avif' : 'heif';
  if (ascii(0, 2) === 'BM') return 'bmp';
  if (ascii(0, 4) === '%PDF') return 'pdf';
  if (/^(\ufeff|\xef\xbb\xbf)?\s*<(\?xml|svg|!DOCTYPE svg)/i.test(ascii(0, 256))) return 'svg';
  return undefined;
}

/**
 * Reads an input image's header (no pixels are decompressed) and refuses it when it is not an
 * image, is in a format other than PNG, JPEG or WebP (415), or declares more than `maxPixels`
 * pixels, naming it by its index.
 */
export async function probeImage(bytes: Uint8Array, index: number, maxPixels: number): Promise<Metadata> {
  if (bytes.length === 0) throw invalidImage(index, 'is empty.');
  const sniffed = sniffFormat(bytes);
  if (sniffed !== undefined && !inputFormats.includes(sniffed)) {
    throw new ApiError(
      'unsupported_media_type',
      `image[${index}] is ${sniffed.toUpperCase()}; send PNG, JPEG or WebP.`,
      { param: `image[${index}]` },
    );
  }
  let metadata: Metadata;
  try {
    if (sniffed === undefined) throw new Error('no image format recognised');
    metadata = await sharp(bytes, { limitInputPixels: false, failOn: 'error' }).metadata();
  } catch (error) {
    throw invalidImage(index, `is not an image this server can read (${describe(error)}); send PNG, JPEG or WebP.`);
  }
  // libvips picks its loader from the same bytes; a mismatch is a file built to confuse the two.
  if (metadata.format !== sniffed)
    throw invalidImage(index, `reads as ${metadata.format ?? 'nothing'} but starts as ${sniffed}.`);
  const width = metadata.width ?? 0;
  const height = metadata.height ?? 0;
  if (width * height > maxPixels) {
    throw invalidImage(
      index,
      `is ${width}x${height} pixels, over the limit of ${maxPixels} pixels (ONNX_GATEWAY_IMAGE_MAX_PIXELS).`,
    );
  }
  return metadata;
}

/**
 * Decodes one input image: upright (EXIF orientation), sRGB, colour and alpha apart. libvips
 * enforces the pixel limit while decoding too, for formats whose headers can lie.
 */
export async function decodeImage(bytes: Uint8Array, index: number, maxPixels: number): Promise<DecodedImage> {
  const metadata = await probeImage(bytes, index, maxPixels);
  try {
    const { data, info } = await sharp(bytes, { limitInputPixels: maxPixels, failOn: 'error', sequentialRead: true })
      .rotate()
      .toColourspace('srgb')
      .ensureAlpha()
      .raw()
      .toBuffer({ resolveWithObject: true });
    const { rgb, alpha } = splitAlpha({ data, width: info.width, height: info.height, channels: 4 });
    return {
      rgb,
      alpha: metadata.hasAlpha && !isOpaque(alpha) ? alpha : undefined,
      format: metadata.format ?? 'unknown',
    };
  } catch (error) {
    throw invalidImage(index, `can not be decoded (${describe(error)}).`);
  }
}

function describe(error: unknown): string {
  return (error as Error).message
    .replace(/^Input buffer (contains|has) /i, '')
    .replace(/\s+/g, ' ')
    .trim();
}

export function splitAlpha(rgba: Raster): { rgb: Raster; alpha: Raster } {
  const pixels = rgba.width * rgba.height;
  const rgb = new Uint8Array(pixels * 3);
  const alpha = new Uint8Array(pixels);
  for (let p = 0, q = 0, r = 0; p < pixels; p++, q += 4, r += 3) {
    rgb[r] = rgba.data[q]!;
    rgb[r + 1] = rgba.data[q + 1]!;
    rgb[r + 2] = rgba.data[q + 2]!;
    alpha[p] = rgba.data[q + 3]!;
  }
  return {
    rgb: { data: rgb, width: rgba.width, height: rgba.height, channels: 3 },
    alpha: { data: alpha, width: rgba.width, height: rgba.height, channels: 1 },
  };
}

export function joinAlpha(rgb: Raster, alpha: Raster): Raster {
  if (rgb.width !== alpha.width || rgb.height !== alpha.height) throw new Error('alpha and colour sizes differ');
  const pixels = rgb.width * rgb.height;
  const data = new Uint8Array(pixels * 4);
  for (let p = 0, q = 0, r = 0; p < pixels; p++, q += 4, r += 3) {
    data[q] = rgb.data[r]!;
    data[q + 1] = rgb.data[r + 1]!;
    data[q + 2] = rgb.data[r + 2]!;
    data[q + 3] = alpha.data[p]!;
  }
  return { data, width: rgb.width, height: rgb.height, channels: 4 };
}

function isOpaque(alpha: Raster): boolean {
  for (let i = 0; i < alpha.data.length; i++) if (alpha.data[i] !== 255) return false;
  return true;
}

function fromRaster(image: Raster) {
  return sharp(image.data, { raw: { width: image.width, height: image.height, channels: image.channels } });
}

async function toRaster(pipeline: Sharp, channels: Raster['channels']): Promise<Raster> {
  // libvips turns a single band into sRGB on the way out unless told to keep the one band.
  if (channels === 1) pipeline = pipeline.extractChannel(0);
  const { data, info } = await pipeline.raw().toBuffer({ resolveWithObject: true });
  if (info.channels !== channels) throw new Error(`expected ${channels} channels from sharp, got ${info.channels}`);
  return { data, width: info.width, height: info.height, channels };
}

/** Resizes to exactly width x height (aspect not kept: callers crop to the aspect first). */
export async function resize(
  image: Raster,
  width: number,
  height: number,
  kernel: keyof KernelEnum = 'lanczos3',
): Promise<Raster> {
  if (image.width === width && image.height === height) return image;
  return toRaster(fromRaster(image).resize(width, height, { fit: 'fill', kernel }), image.channels);
}

export async function crop(image: Raster, left: number, top: number, width: number, height: number): Promise<Raster> {
  if (left === 0 && top === 0 && width === image.width && height === image.height) return image;
  return toRaster(fromRaster(image).extract({ left, top, width, height }), image.channels);
}

/** The centred region of `width` x `height` with the aspect ratio of `aspectWidth` : `aspectHeight` (the "cover" crop). */
export function coverCrop(
  width: number,
  height: number,
  aspectWidth: number,
  aspectHeight: number,
): { left: number; top: number; width: number; height: number } {
  const target = aspectWidth / aspectHeight;
  if (Math.abs(width / height - target) * Math.min(width, height) < 1) return { left: 0, top: 0, width, height };
  if (width / height > target) {
    const w = Math.max(1, Math.round(height * target));
    return { left: Math.floor((width - w) / 2), top: 0, width: w, height };
  }
  const h = Math.max(1, Math.round(width / target));
  return { left: 0, top: Math.floor((height - h) / 2), width, height: h };
}

/** Places an RGBA image over an opaque colour. */
export async function flattenOnColour(image: Raster, colour: { r: number; g: number; b: number }): Promise<Raster> {
  if (image.channels !== 4) return image;
  return toRaster(fromRaster(image).flatten({ background: colour }), 3);
}

/** Places an RGBA image, centred, over another image at least as large (alpha compositing, "over"). */
export async function compositeOver(top: Raster, bottom: Raster): Promise<Raster> {
  if (top.width > bottom.width || top.height > bottom.height)
    throw new Error('the top image is larger than the bottom one');
  const layer = {
    input: Buffer.from(top.data.buffer, top.data.byteOffset, top.data.byteLength),
    raw: { width: top.width, height: top.height, channels: top.channels },
    left: Math.floor((bottom.width - top.width) / 2),
    top: Math.floor((bottom.height - top.height) / 2),
  };
  const composed = fromRaster(bottom).composite([layer]);
  // libvips adds an alpha band while compositing; an opaque bottom stays opaque.
  return bottom.channels === 4 ? toRaster(composed, 4) : toRaster(composed.removeAlpha(), 3);
}

// BT.601 full-range YCbCr, as JPEG and PIL use it.
export function toYCbCr(rgb: Raster): { y: Raster; cb: Uint8Array; cr: Uint8Array } {
  const pixels = rgb.width * rgb.height;
  const y = new Uint8Array(pixels);
  const cb = new Uint8Array(pixels);
  const cr = new Uint8Array(pixels);
  const d = rgb.data;
  for (let p = 0, q = 0; p < pixels; p++, q += 3) {
    const r = d[q]!;
    const g = d[q + 1]!;
    const b = d[q + 2]!;
    y[p] = clampByte(0.299 * r + 0.587 * g + 0.114 * b);
    cb[p] = clampByte(128 - 0.168736 * r - 0.331264 * g + 0.5 * b);
    cr[p] = clampByte(128 + 0.5 * r - 0.418688 * g - 0.081312 * b);
  }
  return { y: { data: y, width: rgb.width, height: rgb.height, channels: 1 }, cb, cr };
}

export function fromYCbCr(y: Raster, cb: Uint8Array, cr: Uint8Array): Raster {
  const pixels = y.width * y.height;
  const data = new Uint8Array(pixels * 3);
  for (let p = 0, q = 0; p < pixels; p++, q += 3) {
    const l = y.data[p]!;
    const u = cb[p]! - 128;
    const v = cr[p]! - 128;
    data[q] = clampByte(l + 1.402 * v);
    data[q + 1] = clampByte(l - 0.344136 * u - 0.714136 * v);
    data[q + 2] = clampByte(l + 1.772 * u);
  }
  return { data, width: y.width, height: y.height, channels: 3 };
}

function clampByte(value: number): number {
  return value <= 0 ? 0 : value >= 255 ? 255 : Math.round(value);
}

export interface EncodeOptions {
  format: OutputFormat;
  /** 0..100: JPEG and WebP quality. */
  quality: number;
  /** 0..9: PNG zlib level (lower is faster, larger). */
  pngLevel: number;
}

export async function encode(image: Raster, options: EncodeOptions): Promise<Buffer> {
  const pipeline = fromRaster(image);
  switch (options.format) {
    case 'png':
      return pipeline.png({ compressionLevel: options.pngLevel }).toBuffer();
    case 'jpeg':
      return pipeline
        .jpeg({ quality: options.quality, chromaSubsampling: options.quality >= 90 ? '4:4:4' : '4:2:0' })
        .toBuffer();
    case 'webp':
      return pipeline.webp({ quality: options.quality, alphaQuality: 100 }).toBuffer();
  }
}
