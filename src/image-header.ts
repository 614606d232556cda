/**
 * What an encoded image says about itself before it is decoded: its format, from the magic number,
 * and its width and height, from the header (PNG's IHDR chunk, the SOFn segment of a JPEG, a WebP's
 * VP8, VP8L or VP8X chunk). A few hundred bytes can declare 20,000 x 20,000 pixels (1.6 GB of RGBA
 * once decoded): the pixel count is checked here, so no decoder ever sees such a file.
 */
import { crc32 } from 'node:zlib';
import { settings, type SettingName } from './config.js';
import { ApiError } from './errors.js';

/** The formats images are taken in: every other one is a parser more to attack, for images nobody sends. */
export const imageFormats = ['png', 'jpeg', 'webp'] as const;
export type ImageFormat = (typeof imageFormats)[number];

export interface ImageHeader {
  format: ImageFormat;
  width: number;
  height: number;
  /** Bits per sample: PNG's bit depth, a JPEG's sample precision; 8 for WebP. */
  bitDepth: number;
}

/** A header that can not be read: truncated, inconsistent, or of a kind the decoders refuse. */
export class ImageHeaderError extends Error {
  constructor(
    readonly format: ImageFormat,
    readonly reason: string,
  ) {
    super(`The ${format.toUpperCase()} header can not be read: ${reason}.`);
    this.name = 'ImageHeaderError';
  }
}

const latin1 = (bytes: Uint8Array, from: number, to: number) =>
  String.fromCharCode(...bytes.subarray(from, Math.min(to, bytes.length)));

const pngSignature = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

/**
 * An encoded image's format from its first bytes: png, jpeg or webp, or the name of another
 * image format (gif, tiff, bmp, avif, heif, ico, pdf, svg) so that a refusal can name it;
 * undefined when the bytes start like no image.
 */
export function sniffImageFormat(bytes: Uint8Array): string | undefined {
  if (pngSignature.every((byte, i) => bytes[i] === byte)) return 'png';
  if (bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'jpeg';
  if (latin1(bytes, 0, 4) === 'RIFF' && latin1(bytes, 8, 12) === 'WEBP') return 'webp';
  if (latin1(bytes, 0, 4) === 'GIF8') return 'gif';
  if (latin1(bytes, 0, 4) === 'II*\0' || latin1(bytes, 0, 4) === 'MM\0*') return 'tiff';
  if (latin1(bytes, 4, 8) === 'ftyp') return /^avi[fs]/.test(latin1(bytes, 8, 12)) ? 'avif' : 'heif';
  if (latin1(bytes, 0, 2) === 'BM') return 'bmp';
  if (latin1(bytes, 0, 4) === '\0\0\x01\0') return 'ico';
  if (latin1(bytes, 0, 4) === '%PDF') return 'pdf';
  if (/^(\xef\xbb\xbf)?\s*<(\?xml|svg|!DOCTYPE svg)/i.test(latin1(bytes, 0, 256))) return 'svg';
  return undefined;
}

const u16be = (b: Uint8Array, at: number) => (b[at]! << 8) | b[at + 1]!;
const u32be = (b: Uint8Array, at: number) =>
  ((b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!) >>> 0;
const u16le = (b: Uint8Array, at: number) => b[at]! | (b[at + 1]! << 8);
const u24le = (b: Uint8Array, at: number) => b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16);
const u32le = (b: Uint8Array, at: number) =>
  (b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16) | (b[at + 3]! << 24)) >>> 0;

/** PNG: the signature, then IHDR, the first chunk (13 bytes: width, height, bit depth, colour type, ...), with its CRC. */
function pngHeader(bytes: Uint8Array): ImageHeader {
  const fail = (reason: string) => new ImageHeaderError('png', reason);
  if (bytes.length < 33) throw fail('the file ends inside the IHDR chunk');
  if (u32be(bytes, 8) !== 13 || latin1(bytes, 12, 16) !== 'IHDR') throw fail('the first chunk is not a 13-byte IHDR');
  if (crc32(bytes.subarray(12, 29)) !== u32be(bytes, 29)) throw fail("the IHDR chunk's CRC does not match");
  const width = u32be(bytes, 16);
  const height = u32be(bytes, 20);
  // The PNG specification bounds both at 2^31 - 1.
  if (width === 0 || height === 0 || width > 0x7fffffff || height > 0x7fffffff)
    throw fail(`it declares ${width}x${height} pixels`);
  const bitDepth = bytes[24]!;
  const colourType = bytes[25]!;
  const depths: Record<number, number[]> = { 0: [1, 2, 4, 8, 16], 2: [8, 16], 3: [1, 2, 4, 8], 4: [8, 16], 6: [8, 16] };
  if (!depths[colourType]?.includes(bitDepth))
    throw fail(`colour type ${colourType} with bit depth ${bitDepth} is not a PNG kind`);
  return { format: 'png', width, height, bitDepth };
}

/** The SOFn markers, which open a frame and carry its size: C0-CF but DHT (C4), JPG (C8) and DAC (CC). */
const isStartOfFrame = (marker: number) =>
  marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;

/** JPEG: the segments after SOI, walked by their lengths up to the first SOFn, which holds precision, height and width. */
function jpegHeader(bytes: Uint8Array): ImageHeader {
  const fail = (reason: string) => new ImageHeaderError('jpeg', reason);
  let at = 2;
  for (;;) {
    if (at >= bytes.length) throw fail('the file ends before the frame header');
    if (bytes[at] !== 0xff) throw fail(`byte ${at} is not a marker`);
    // Any number of 0xFF may pad before a marker.
    while (bytes[at] === 0xff) at++;
    if (at >= bytes.length) throw fail('the file ends before the frame header');
    const marker = bytes[at++]!;
    // Markers without a segment: TEM and the restart markers.
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) continue;
    if (marker === 0xd9 || marker === 0xda || marker === 0xd8)
      throw fail(`marker 0x${marker.toString(16).toUpperCase()} comes before the frame header`);
    if (at + 2 > bytes.length) throw fail('the file ends inside a segment');
    const length = u16be(bytes, at);
    if (length < 2) throw fail(`a segment declares ${length} bytes`);
    if (isStartOfFrame(marker)) {
      if (length < 8 || at + 8 > bytes.length) throw fail('the file ends inside the frame header');
      const bitDepth = bytes[at + 2]!;
      const height = u16be(bytes, at + 3);
      const width = u16be(bytes, at + 5);
      // A height of 0 is given later by a DNL marker, which libjpeg does not read.
      if (width === 0 || height === 0) throw fail(`it declares ${width}x${height} pixels`);
      return { format: 'jpeg', width, height, bitDepth };
    }
    at += length;
  }
}

/** The size a VP8 (lossy) or VP8L (lossless) bitstream declares; `data` is the chunk's payload. */
function webpBitstreamSize(kind: string, bytes: Uint8Array, data: number): { width: number; height: number } {
  const fail = (reason: string) => new ImageHeaderError('webp', reason);
  if (kind === 'VP8 ') {
    if (data + 10 > bytes.length) throw fail('the file ends inside the VP8 frame header');
    // The frame tag's lowest bit is 0 for a key frame; a still image is one key frame.
    if ((bytes[data]! & 1) !== 0) throw fail('the VP8 frame is not a key frame');
    if (bytes[data + 3] !== 0x9d || bytes[data + 4] !== 0x01 || bytes[data + 5] !== 0x2a)
      throw fail('the VP8 start code is missing');
    const width = u16le(bytes, data + 6) & 0x3fff;
    const height = u16le(bytes, data + 8) & 0x3fff;
    if (width === 0 || height === 0) throw fail(`it declares ${width}x${height} pixels`);
    return { width, height };
  }
  if (data + 5 > bytes.length) throw fail('the file ends inside the VP8L header');
  if (bytes[data] !== 0x2f) throw fail('the VP8L signature is missing');
  const bits = u32le(bytes, data + 1);
  if (bits >>> 29 !== 0) throw fail(`VP8L version ${bits >>> 29} is not defined`);
  return { width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 };
}

/**
 * WebP: a RIFF file whose first chunk is VP8 (lossy), VP8L (lossless) or VP8X (extended: a canvas
 * size, then optional chunks and the image's bitstream or animation frames). A still extended
 * image's bitstream must be of the canvas's size, as libwebp requires, so the size checked is the
 * size decoded.
 */
function webpHeader(bytes: Uint8Array): ImageHeader {
  const fail = (reason: string) => new ImageHeaderError('webp', reason);
  if (bytes.length < 20) throw fail('the file ends before its first chunk');
  const first = latin1(bytes, 12, 16);
  if (first === 'VP8 ' || first === 'VP8L')
    return { format: 'webp', ...webpBitstreamSize(first, bytes, 20), bitDepth: 8 };
  if (first !== 'VP8X') throw fail(`the first chunk is "${first.replace(/[^\x20-\x7e]/g, '?')}"`);
  if (bytes.length < 30) throw fail('the file ends inside the VP8X chunk');
  const flags = bytes[20]!;
  const width = u24le(bytes, 24) + 1;
  const height = u24le(bytes, 27) + 1;
  if (width * height > 0xffffffff) throw fail(`the canvas of ${width}x${height} pixels is over 2^32`);
  const animated = (flags & 0x02) !== 0;
  if (!animated) {
    // The chunks after VP8X (ICCP, ALPH, ...) up to the bitstream; each is padded to an even size.
    let at = 20 + u32le(bytes, 16);
    for (;;) {
      at += at & 1;
      if (at + 8 > bytes.length) throw fail('the file ends before the image data');
      const kind = latin1(bytes, at, at + 4);
      if (kind === 'VP8 ' || kind === 'VP8L') {
        const size = webpBitstreamSize(kind, bytes, at + 8);
        if (size.width !== width || size.height !== height)
          throw fail(`the image is ${size.width}x${size.height} pixels on a canvas of ${width}x${height}`);
        break;
      }
      at += 8 + u32le(bytes, at + 4);
    }
  }
  return { format: 'webp', width, height, bitDepth: 8 };
}

/** The format and size an image's header declares; throws ImageHeaderError when it can not be read. */
export function readImageHeader(bytes: Uint8Array, format: ImageFormat): ImageHeader {
  return format === 'png' ? pngHeader(bytes) : format === 'jpeg' ? jpegHeader(bytes) : webpHeader(bytes);
}

export interface ImageLimits {
  /** Largest encoded image, in bytes. */
  maxBytes: number;
  /** Most pixels (width x height) an image may declare. */
  maxPixels: number;
  /** The settings the limits come from, named in the refusals; default embeddingImageMaxBytes and imageMaxPixels. */
  settings?: { maxBytes: SettingName; maxPixels: SettingName };
}

const defaultSettings = { maxBytes: 'embeddingImageMaxBytes', maxPixels: 'imageMaxPixels' } as const;

/**
 * An encoded image checked before anything decodes it: bytes over the limit are 413, a format other
 * than PNG, JPEG or WebP is 415, bytes that are no image or a header that can not be read are 400,
 * and so is a header that declares more pixels than the limit. `param` names the image in the errors.
 */
export function checkImageBytes(bytes: Uint8Array, limits: ImageLimits, param: string): ImageHeader {
  const named = limits.settings ?? defaultSettings;
  if (bytes.length === 0) throw new ApiError('invalid_image', `${param} is empty.`, { param });
  if (bytes.length > limits.maxBytes)
    throw new ApiError(
      'payload_too_large',
      `${param} is ${bytes.length} bytes, over the limit of ${limits.maxBytes} bytes for an image (${settings[named.maxBytes].env}).`,
      { param },
    );
  const sniffed = sniffImageFormat(bytes);
  if (sniffed === undefined)
    throw new ApiError('invalid_image', `${param} is not an image: send PNG, JPEG or WebP.`, { param });
  if (!(imageFormats as readonly string[]).includes(sniffed))
    throw new ApiError('unsupported_media_type', `${param} is ${sniffed.toUpperCase()}; send PNG, JPEG or WebP.`, {
      param,
    });
  let header: ImageHeader;
  try {
    header = readImageHeader(bytes, sniffed as ImageFormat);
  } catch (error) {
    if (!(error instanceof ImageHeaderError)) throw error;
    throw new ApiError(
      'invalid_image',
      `${param} is a ${error.format.toUpperCase()} whose header can not be read: ${error.reason}.`,
      { param },
    );
  }
  if (header.width * header.height > limits.maxPixels)
    throw new ApiError(
      'invalid_image',
      `${param} is ${header.width}x${header.height} pixels, over the limit of ${limits.maxPixels} pixels (${settings[named.maxPixels].env}).`,
      { param },
    );
  return header;
}
