/**
 * The common PNGs decoded here rather than by sharp: 8-bit, not interlaced, without EXIF (so
 * upright as stored). PNG is lossless, so any correct decoder gives Pillow's pixels; for a small
 * image the decode itself is a fraction of what a sharp pipeline costs to set up. Anything else
 * (other bit depths, interlacing, an eXIf chunk, animation) is left to sharp (`undefined`).
 */
import { crc32, inflateSync } from 'node:zlib';
import type { RgbImage } from './resample.js';

/** A PNG this decoder takes, and the chunks it reads. */
interface Parsed {
  width: number;
  height: number;
  colourType: number;
  palette?: Uint8Array;
  data: Uint8Array[];
}

/** Bytes per pixel of each 8-bit colour type: gray, RGB, palette, gray + alpha, RGBA. */
const CHANNELS: Record<number, number> = { 0: 1, 2: 3, 3: 1, 4: 2, 6: 4 };

class Corrupt extends Error {}

function parse(bytes: Uint8Array): Parsed | undefined {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 8;
  let header: Parsed | undefined;
  const data: Uint8Array[] = [];
  while (at + 12 <= bytes.length) {
    const length = view.getUint32(at);
    const end = at + 12 + length;
    if (length > 0x7fffffff || end > bytes.length) throw new Corrupt('a chunk runs past the end of the file');
    const type = String.fromCharCode(bytes[at + 4]!, bytes[at + 5]!, bytes[at + 6]!, bytes[at + 7]!);
    const body = bytes.subarray(at + 8, at + 8 + length);
    if (crc32(bytes.subarray(at + 4, at + 8 + length)) !== view.getUint32(at + 8 + length))
      throw new Corrupt(`the ${type} chunk's checksum is wrong`);
    if (!header && type !== 'IHDR') throw new Corrupt('the file does not start with IHDR');
    switch (type) {
      case 'IHDR': {
        const width = view.getUint32(at + 8);
        const height = view.getUint32(at + 12);
        const [depth, colourType, compression, filter, interlace] = body.subarray(8, 13);
        if (length !== 13 || width === 0 || height === 0) throw new Corrupt('the header is invalid');
        if (depth !== 8 || interlace !== 0 || compression !== 0 || filter !== 0) return undefined;
        if (CHANNELS[colourType!] === undefined) return undefined;
        header = { width, height, colourType: colourType!, data };
        break;
      }
      case 'PLTE':
        header!.palette = body;
        break;
      case 'IDAT':
        data.push(body);
        break;
      case 'eXIf':
      case 'acTL':
        return undefined;
      case 'IEND':
        return data.length > 0 ? header : undefined;
    }
    at = end;
  }
  throw new Corrupt('the file ends before IEND');
}

function paeth(a: number, b: number, c: number): number {
  const p = a + b - c;
  const pa = Math.abs(p - a);
  const pb = Math.abs(p - b);
  const pc = Math.abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/** Reverses the scanline filters in place; returns the rows without their filter bytes. */
function unfilter(raw: Uint8Array, width: number, height: number, bpp: number): Uint8Array {
  const stride = width * bpp;
  const out = new Uint8Array(stride * height);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!;
    const inRow = y * (stride + 1) + 1;
    const row = y * stride;
    const up = row - stride;
    switch (filter) {
      case 0:
        out.set(raw.subarray(inRow, inRow + stride), row);
        break;
      case 1:
        for (let i = 0; i < stride; i++) out[row + i] = raw[inRow + i]! + (i >= bpp ? out[row + i - bpp]! : 0);
        break;
      case 2:
        for (let i = 0; i < stride; i++) out[row + i] = raw[inRow + i]! + (y > 0 ? out[up + i]! : 0);
        break;
      case 3:
        for (let i = 0; i < stride; i++) {
          const left = i >= bpp ? out[row + i - bpp]! : 0;
          const above = y > 0 ? out[up + i]! : 0;
          out[row + i] = raw[inRow + i]! + ((left + above) >> 1);
        }
        break;
      case 4:
        for (let i = 0; i < stride; i++) {
          const left = i >= bpp ? out[row + i - bpp]! : 0;
          const above = y > 0 ? out[up + i]! : 0;
          const corner = y > 0 && i >= bpp ? out[up + i - bpp]! : 0;
          out[row + i] = raw[inRow + i]! + paeth(left, above, corner);
        }
        break;
      default:
        throw new Corrupt(`row ${y} has an unknown filter (${filter})`);
    }
  }
  return out;
}

/**
 * The RGB pixels of a PNG this decoder takes (see above), as convert('RGB') gives them: gray
 * replicated, palettes expanded, alpha dropped. Undefined for the PNGs left to sharp, which are
 * also every PNG with something wrong (a bad checksum, truncated or excess data, too many pixels):
 * what is wrong with them is sharp's to say, as it is for every other image.
 */
export function decodePng(bytes: Uint8Array, maxPixels: number): RgbImage | undefined {
  let parsed: Parsed | undefined;
  try {
    parsed = parse(bytes);
  } catch (error) {
    if (error instanceof Corrupt) return undefined;
    throw error;
  }
  if (!parsed) return undefined;
  const { width, height, colourType, palette } = parsed;
  if (width * height > maxPixels) return undefined;
  const bpp = CHANNELS[colourType]!;
  const expected = (width * bpp + 1) * height;
  let raw: Buffer;
  try {
    raw = inflateSync(Buffer.concat(parsed.data), { maxOutputLength: expected });
  } catch {
    return undefined;
  }
  if (raw.length !== expected) return undefined;
  let pixels: Uint8Array;
  try {
    pixels = unfilter(raw, width, height, bpp);
  } catch (error) {
    if (error instanceof Corrupt) return undefined;
    throw error;
  }
  const count = width * height;
  if (colourType === 2) return { data: pixels, width, height };
  const rgb = new Uint8Array(count * 3);
  if (colourType === 3) {
    if (!palette || palette.length % 3 !== 0) return undefined;
    const entries = palette.length / 3;
    for (let p = 0, r = 0; p < count; p++, r += 3) {
      const index = pixels[p]!;
      // An index past the palette: left to sharp rather than guessing what a decoder makes of it.
      if (index >= entries) return undefined;
      rgb[r] = palette[index * 3]!;
      rgb[r + 1] = palette[index * 3 + 1]!;
      rgb[r + 2] = palette[index * 3 + 2]!;
    }
    return { data: rgb, width, height };
  }
  if (colourType === 6) {
    for (let p = 0, q = 0, r = 0; p < count; p++, q += 4, r += 3) {
      rgb[r] = pixels[q]!;
      rgb[r + 1] = pixels[q + 1]!;
      rgb[r + 2] = pixels[q + 2]!;
    }
    return { data: rgb, width, height };
  }
  // Gray (colour type 0) or gray + alpha (4): the gray replicated.
  for (let p = 0, q = 0, r = 0; p < count; p++, q += bpp, r += 3) rgb[r] = rgb[r + 1] = rgb[r + 2] = pixels[q]!;
  return { data: rgb, width, height };
}
