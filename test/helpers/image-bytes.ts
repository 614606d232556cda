/**
 * Encoded images made by hand, byte by byte: headers that declare any size (20,000 x 20,000 in a
 * few dozen bytes), each WebP kind, and files of other formats, for the tests of what is read
 * from an image's header before anything decodes it.
 */
import { crc32 } from 'node:zlib';
import sharp from 'sharp';

const ascii = (text: string) => Buffer.from(text, 'latin1');
const u32be = (value: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(value);
  return b;
};
const u32le = (value: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(value);
  return b;
};

function pngChunk(type: string, data: Buffer): Buffer {
  const body = Buffer.concat([ascii(type), data]);
  return Buffer.concat([u32be(data.length), body, u32be(crc32(body))]);
}

/** A PNG's signature and IHDR (8-bit RGB unless told), then a token IDAT and IEND: no decoder would get far. */
export function pngHeader(width: number, height: number, bitDepth = 8, colourType = 2): Buffer {
  const ihdr = Buffer.concat([u32be(width), u32be(height), Buffer.from([bitDepth, colourType, 0, 0, 0])]);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', ihdr),
    pngChunk('IDAT', Buffer.from([0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01])),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A JPEG's SOI, a JFIF APP0, a comment, fill bytes and a restart marker, then SOF (baseline unless told) and SOS. */
export function jpegHeader(width: number, height: number, sof = 0xc0): Buffer {
  const segment = (marker: number, data: Buffer) =>
    Buffer.concat([Buffer.from([0xff, marker, (data.length + 2) >> 8, (data.length + 2) & 0xff]), data]);
  const frame = Buffer.from([8, height >> 8, height & 0xff, width >> 8, width & 0xff, 1, 1, 0x11, 0]);
  return Buffer.concat([
    Buffer.from([0xff, 0xd8]),
    segment(0xe0, Buffer.concat([ascii('JFIF\0'), Buffer.from([1, 1, 0, 0, 1, 0, 1, 0, 0])])),
    segment(0xfe, ascii('made by hand')),
    Buffer.from([0xff, 0xff, 0xd0]),
    segment(sof, frame),
    segment(0xda, Buffer.from([1, 1, 0, 0, 0x3f, 0])),
    Buffer.from([0x00, 0xff, 0xd9]),
  ]);
}

function riff(chunks: Buffer[]): Buffer {
  const body = Buffer.concat([ascii('WEBP'), ...chunks]);
  return Buffer.concat([ascii('RIFF'), u32le(body.length), body]);
}

function webpChunk(kind: string, data: Buffer): Buffer {
  const padded = data.length % 2 ? Buffer.concat([data, Buffer.alloc(1)]) : data;
  return Buffer.concat([ascii(kind), u32le(data.length), padded]);
}

/** A VP8 (lossy) key frame header: frame tag, start code, 14-bit width and height. */
function vp8(width: number, height: number): Buffer {
  const size = Buffer.alloc(4);
  size.writeUInt16LE(width & 0x3fff, 0);
  size.writeUInt16LE(height & 0x3fff, 2);
  return webpChunk('VP8 ', Buffer.concat([Buffer.from([0x10, 0x02, 0x00, 0x9d, 0x01, 0x2a]), size, Buffer.alloc(8)]));
}

/** A VP8L (lossless) header: the signature byte, then width - 1 and height - 1 in 14 bits each, alpha, version 0. */
function vp8l(width: number, height: number): Buffer {
  const bits = ((width - 1) & 0x3fff) | (((height - 1) & 0x3fff) << 14);
  return webpChunk('VP8L', Buffer.concat([Buffer.from([0x2f]), u32le(bits >>> 0), Buffer.alloc(4)]));
}

/** A VP8X chunk: flags, then the canvas's width - 1 and height - 1 in 24 bits each. */
function vp8x(width: number, height: number, flags = 0): Buffer {
  const data = Buffer.alloc(10);
  data[0] = flags;
  data.writeUIntLE(width - 1, 4, 3);
  data.writeUIntLE(height - 1, 7, 3);
  return webpChunk('VP8X', data);
}

export const webp = {
  lossy: (width: number, height: number) => riff([vp8(width, height)]),
  lossless: (width: number, height: number) => riff([vp8l(width, height)]),
  /** Extended, still: VP8X, an ICC profile, then a bitstream (lossless) of the size given, the canvas's by default. */
  extended: (width: number, height: number, bitstream = { width, height }) =>
    riff([vp8x(width, height, 0x20), webpChunk('ICCP', Buffer.alloc(7, 1)), vp8l(bitstream.width, bitstream.height)]),
  /** Extended and animated: VP8X with the animation flag and an ANIM chunk; frames are not looked at. */
  animated: (width: number, height: number) =>
    riff([vp8x(width, height, 0x02), webpChunk('ANIM', Buffer.alloc(6)), webpChunk('ANMF', Buffer.alloc(16))]),
};

/** A 1x1 GIF. */
export const gif = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');

/** Deterministic noise bytes that start like no image format. */
export function randomBytes(length: number, seed = 11): Buffer {
  const bytes = Buffer.alloc(length);
  let state = seed;
  for (let i = 0; i < length; i++) {
    state = (state * 1103515245 + 12345) >>> 0;
    bytes[i] = state >>> 24;
  }
  bytes[0] = 0x42; // never a magic number's first byte
  bytes[1] = 0x42;
  return bytes;
}

/** A real image of the size given, encoded by sharp (libvips): a gradient, RGB or RGBA. */
export async function encoded(
  format: 'png' | 'jpeg' | 'webp',
  width: number,
  height: number,
  options: { alpha?: boolean; progressive?: boolean; lossless?: boolean } = {},
): Promise<Buffer> {
  const channels = options.alpha ? 4 : 3;
  const pixels = Buffer.alloc(width * height * channels);
  for (let i = 0; i < pixels.length; i++) pixels[i] = (i * 7) % 251;
  const image = sharp(pixels, { raw: { width, height, channels } });
  if (format === 'png') return image.png().toBuffer();
  if (format === 'jpeg') return image.jpeg({ progressive: options.progressive ?? false }).toBuffer();
  return image.webp({ lossless: options.lossless ?? false }).toBuffer();
}

/** bytes as a data URI of the media type given. */
export const dataUri = (bytes: Uint8Array, mediaType = 'image/png') =>
  `data:${mediaType};base64,${Buffer.from(bytes).toString('base64')}`;
