/**
 * Encoded PNG, JPEG or WebP bytes to the RGB pixels transformers' `load_image` gives:
 * `ImageOps.exif_transpose(Image.open(...)).convert('RGB')`. Common PNGs are decoded in png.ts
 * (lossless: the same pixels, without a sharp pipeline's cost); otherwise sharp decodes, and for JPEG
 * and WebP applies the EXIF orientation (the same pixels as Pillow's on these formats). A PNG's
 * orientation is found as Pillow finds it (png-orientation.ts: eXIf, ImageMagick's raw profile, XMP)
 * and applied here; sharp never resizes here, and embedded
 * ICC profiles are ignored, as Pillow ignores them. Where Pillow's convert('RGB') is not what
 * libvips' sRGB output gives, it is done here as Pillow does it:
 * - alpha is dropped, never composited (libvips' colour bands are the straight, unpremultiplied ones);
 * - CMYK JPEGs: Pillow's naive formula on the file's CMYK values, not an ICC conversion;
 * - 16-bit grayscale PNGs: Pillow reads them as 32-bit integers and convert('RGB') clamps them to
 *   0..255 (libvips would keep the high byte). 16-bit colour PNGs are read as their high bytes by both.
 */
import type { OutputInfo } from 'sharp';
import sharp from '../../libvips.js';
import { applyOrientation } from './orientation.js';
import { decodePng } from './png.js';
import { pngOrientation } from './png-orientation.js';
import type { RgbImage } from './resample.js';

/** A corrupt image, or one in a format or layout this server does not read. */
export class ImageDecodeError extends Error {
  override name = 'ImageDecodeError';
}

type Format = 'png' | 'jpeg' | 'webp';

function formatOf(bytes: Uint8Array): Format | undefined {
  if (bytes[0] === 0x89 && bytes[1] === 0x50 && bytes[2] === 0x4e && bytes[3] === 0x47) return 'png';
  if (bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'jpeg';
  const ascii = (from: number, to: number) => String.fromCharCode(...bytes.subarray(from, to));
  if (bytes.length >= 12 && ascii(0, 4) === 'RIFF' && ascii(8, 12) === 'WEBP') return 'webp';
  return undefined;
}

/** The colour type and bit depth of a PNG's IHDR (always the first chunk). */
function pngHeader(bytes: Uint8Array): { depth: number; colourType: number } | undefined {
  if (bytes.length < 33) return undefined;
  return { depth: bytes[24]!, colourType: bytes[25]! };
}

/** The number of components of a JPEG's first frame header (SOFn), found by walking its segments. */
function jpegComponents(bytes: Uint8Array): number | undefined {
  let i = 2;
  while (i + 9 < bytes.length) {
    if (bytes[i] !== 0xff) return undefined;
    const marker = bytes[i + 1]!;
    if (marker === 0xff) {
      i++;
      continue;
    }
    const length = (bytes[i + 2]! << 8) | bytes[i + 3]!;
    const isFrame = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
    if (isFrame) return bytes[i + 9];
    if (marker === 0xda || marker === 0xd9) return undefined;
    i += 2 + length;
  }
  return undefined;
}

function describe(error: unknown): string {
  return (error as Error).message
    .replace(/^Input buffer (contains|has) /i, '')
    .replace(/\s+/g, ' ')
    .trim();
}

/** Pillow's cmyk2rgb: 255 - k, less c (m, y) times (255 - k) / 255 in its integer arithmetic. */
function cmykToRgb(cmyk: Uint8Array, pixels: number): Uint8Array {
  const rgb = new Uint8Array(pixels * 3);
  for (let p = 0, q = 0, r = 0; p < pixels; p++, q += 4, r += 3) {
    const nk = 255 - cmyk[q + 3]!;
    for (let c = 0; c < 3; c++) {
      const tmp = cmyk[q + c]! * nk + 128;
      const v = nk - (((tmp >> 8) + tmp) >> 8);
      rgb[r + c] = v < 0 ? 0 : v > 255 ? 255 : v;
    }
  }
  return rgb;
}

/**
 * 16-bit gray clamped to 0..255 and replicated, as Pillow's I -> RGB conversion does; `bands` is 2
 * where a tRNS chunk made libvips add an alpha band (Pillow reads the file as I and ignores it).
 */
function gray16ToRgb(gray: Uint16Array, pixels: number, bands: number): Uint8Array {
  const rgb = new Uint8Array(pixels * 3);
  for (let p = 0, q = 0, r = 0; p < pixels; p++, q += bands, r += 3) {
    const v = gray[q]!;
    rgb[r] = rgb[r + 1] = rgb[r + 2] = v > 255 ? 255 : v;
  }
  return rgb;
}

/** Keeps the first three of `channels` bands: colour, the alpha dropped. */
function dropAlpha(data: Uint8Array, pixels: number): Uint8Array {
  const rgb = new Uint8Array(pixels * 3);
  for (let p = 0, q = 0, r = 0; p < pixels; p++, q += 4, r += 3) {
    rgb[r] = data[q]!;
    rgb[r + 1] = data[q + 1]!;
    rgb[r + 2] = data[q + 2]!;
  }
  return rgb;
}

/** Decodes PNG / JPEG / WebP bytes to upright RGB as Pillow's `exif_transpose` + `convert('RGB')` give it. */
export async function decodeRgb(bytes: Uint8Array, maxPixels: number): Promise<RgbImage> {
  if (bytes.length === 0) throw new ImageDecodeError('the image is empty.');
  const format = formatOf(bytes);
  if (!format) throw new ImageDecodeError('the image is not PNG, JPEG or WebP.');
  if (format !== 'png') return decodeWithSharp(bytes, format, maxPixels);
  const orientation = pngOrientation(bytes);
  const decoded = decodePng(bytes, maxPixels) ?? (await decodeWithSharp(bytes, format, maxPixels));
  return applyOrientation(decoded, orientation);
}

/** sharp's decode, upright by the file's EXIF for JPEG and WebP, as stored for PNG. */
async function decodeWithSharp(bytes: Uint8Array, format: Format, maxPixels: number): Promise<RgbImage> {
  const png = format === 'png' ? pngHeader(bytes) : undefined;
  const gray16 = png !== undefined && png.depth === 16 && png.colourType === 0;
  const cmyk = format === 'jpeg' && jpegComponents(bytes) === 4;

  let pipeline = sharp(bytes, {
    limitInputPixels: maxPixels,
    failOn: 'error',
    ignoreIcc: true,
    sequentialRead: true,
  });
  if (format !== 'png') pipeline = pipeline.rotate();
  if (cmyk) pipeline = pipeline.pipelineColourspace('cmyk').toColourspace('cmyk');
  else if (gray16) pipeline = pipeline.pipelineColourspace('grey16').toColourspace('grey16');
  let decoded: { data: Buffer; info: OutputInfo };
  try {
    decoded = await pipeline.raw(gray16 ? { depth: 'ushort' } : undefined).toBuffer({ resolveWithObject: true });
  } catch (error) {
    throw new ImageDecodeError(`the image can not be decoded (${describe(error)}).`);
  }
  const { data, info } = decoded;
  const { width, height, channels } = info;
  const pixels = width * height;
  const bytesOf = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);

  if (cmyk) {
    if (channels !== 4) throw new ImageDecodeError(`the CMYK JPEG decoded to ${channels} bands, not 4.`);
    return { data: cmykToRgb(bytesOf, pixels), width, height };
  }
  if (gray16) {
    if ((channels !== 1 && channels !== 2) || data.byteLength !== pixels * channels * 2)
      throw new ImageDecodeError(
        `the 16-bit grayscale PNG decoded to ${channels} bands of ${data.byteLength / pixels} bytes.`,
      );
    const gray = new Uint16Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength));
    return { data: gray16ToRgb(gray, pixels, channels), width, height };
  }
  // libvips writes sRGB on the way out: gray is replicated, palettes expanded, alpha kept as a 4th band.
  if (channels === 3) return { data: bytesOf, width, height };
  if (channels === 4) return { data: dropAlpha(bytesOf, pixels), width, height };
  throw new ImageDecodeError(`the image decoded to ${channels} bands; expected RGB.`);
}
