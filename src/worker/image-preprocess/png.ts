/**
 * The common PNGs decoded here rather than by sharp: 8-bit, not interlaced, as stored (their
 * orientation is applied after, png-orientation.ts). PNG is lossless, so any correct decoder gives
 * Pillow's pixels; for a small image the decode itself is a fraction of what a sharp pipeline costs
 * to set up. Anything else (other bit depths, interlacing, animation) is left to sharp (`undefined`).
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
      case 'acTL':
        return undefined;
      case 'IEND':
        return data.length > 0 ? header : undefined;
    }
    at = end;
  }
  throw new Corrupt('the file ends before IEND');
}

/**
 * Reverses the scanline filters; returns the rows without their filter bytes. The first row reads a
 * row of zeros above it, and each filter's first pixel (no left neighbour) is done apart, so the
 * loops over the rest of a row have no branches.
 */
function unfilter(raw: Uint8Array, width: number, height: number, bpp: number): Uint8Array {
  const stride = width * bpp;
  const out = new Uint8Array(stride * height);
  const zeros = new Uint8Array(stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!;
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const row = out.subarray(y * stride, (y + 1) * stride);
    const above = y > 0 ? out.subarray((y - 1) * stride, y * stride) : zeros;
    const first = Math.min(bpp, stride);
    switch (filter) {
      case 0:
        row.set(line);
        break;
      case 1:
        for (let i = 0; i < first; i++) row[i] = line[i]!;
        for (let i = first; i < stride; i++) row[i] = line[i]! + row[i - bpp]!;
        break;
      case 2:
        for (let i = 0; i < stride; i++) row[i] = line[i]! + above[i]!;
        break;
      case 3:
        for (let i = 0; i < first; i++) row[i] = line[i]! + (above[i]! >> 1);
        for (let i = first; i < stride; i++) row[i] = line[i]! + ((row[i - bpp]! + above[i]!) >> 1);
        break;
      case 4:
        // paeth(0, above, 0) is above.
        for (let i = 0; i < first; i++) row[i] = line[i]! + above[i]!;
        for (let i = first; i < stride; i++) {
          const a = row[i - bpp]!;
          const b = above[i]!;
          const c = above[i - bpp]!;
          const pa = Math.abs(b - c);
          const pb = Math.abs(a - c);
          const pc = Math.abs(a + b - c - c);
          row[i] = line[i]! + (pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
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
    const data = parsed.data.length === 1 ? parsed.data[0]! : Buffer.concat(parsed.data);
    raw = inflateSync(data, { maxOutputLength: expected });
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
