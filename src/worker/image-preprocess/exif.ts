/**
 * The orientation tag of an EXIF block, read as Pillow 9.4 reads it (`Image.Exif.load`, then
 * `getexif().get(0x0112)`), for the PNGs whose orientation is ours to find (png-orientation.ts).
 * Only the first IFD is read. Its rules, kept here because they decide which pixels come out:
 * - the block may start with "Exif\0\0" (stripped once); then a TIFF header, either byte order;
 * - entries are read in order; one of an unknown type, or with no data, is skipped; an entry whose
 *   data lies past the end stops the reading, the entries before it kept; a later duplicate wins;
 * - the value is the tag's first: an integer, a rational or a float equal to 2..8 is a transpose;
 *   any other value (1, 0, 9, bytes, text) is an orientation that leaves the image as stored.
 */

/** EXIF orientation: 1 is upright, 2..8 the seven flips and rotations. */
export type Orientation = 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8;

/** Bytes per value of each TIFF type Pillow reads; the others are skipped. */
const UNIT: Record<number, number> = {
  1: 1,
  2: 1,
  3: 2,
  4: 4,
  5: 8,
  6: 1,
  7: 1,
  8: 2,
  9: 4,
  10: 8,
  11: 4,
  12: 8,
  13: 4,
  16: 8,
};

const ORIENTATION_TAG = 0x0112;
const EXIF_PREFIX = [0x45, 0x78, 0x69, 0x66, 0, 0];

/** `data` without a leading "Exif\0\0", as Pillow strips it once. */
export function withoutExifPrefix(data: Uint8Array): Uint8Array {
  return EXIF_PREFIX.every((byte, i) => data[i] === byte) ? data.subarray(EXIF_PREFIX.length) : data;
}

/** The orientation a value of `type` means: the integer 2..8 it equals, else 1. */
function orientationOf(view: DataView, at: number, type: number, little: boolean): Orientation {
  let value: number;
  switch (type) {
    case 3:
      value = view.getUint16(at, little);
      break;
    case 8:
      value = view.getInt16(at, little);
      break;
    case 4:
    case 13:
      value = view.getUint32(at, little);
      break;
    case 6:
      value = view.getInt8(at);
      break;
    case 9:
      value = view.getInt32(at, little);
      break;
    case 11:
      value = view.getFloat32(at, little);
      break;
    case 12:
      value = view.getFloat64(at, little);
      break;
    case 16: {
      const big = view.getBigUint64(at, little);
      value = big <= 8n ? Number(big) : 0;
      break;
    }
    case 5:
    case 10: {
      // A Fraction compares equal to an integer k when num == k * den (den 0: NaN, never equal).
      const num = type === 5 ? view.getUint32(at, little) : view.getInt32(at, little);
      const den = type === 5 ? view.getUint32(at + 4, little) : view.getInt32(at + 4, little);
      value = den !== 0 && num % den === 0 ? num / den : 0;
      break;
    }
    default:
      // BYTE and UNDEFINED read as bytes, ASCII as text: no integer.
      return 1;
  }
  return Number.isInteger(value) && value >= 2 && value <= 8 ? (value as Orientation) : 1;
}

/**
 * The orientation of a TIFF-structured EXIF block (its "Exif\0\0" already stripped), or undefined
 * where it has no orientation tag. A block Pillow can not read at all (no TIFF header, BigTIFF) is
 * one without the tag.
 */
export function exifOrientation(tiff: Uint8Array): Orientation | undefined {
  if (tiff.length < 8) return undefined;
  const head = String.fromCharCode(tiff[0]!, tiff[1]!, tiff[2]!, tiff[3]!);
  if (!['MM\0*', 'II*\0', 'MM*\0', 'II\0*', 'MM\0+', 'II+\0'].includes(head)) return undefined;
  // Pillow takes BigTIFF from the third byte alone, and then fails to read its header.
  if (tiff[2] === 0x2b) return undefined;
  const little = tiff[0] === 0x49;
  const view = new DataView(tiff.buffer, tiff.byteOffset, tiff.byteLength);
  let at = view.getUint32(4, little);
  if (at + 2 > tiff.length) return undefined;
  const count = view.getUint16(at, little);
  at += 2;
  let found: Orientation | undefined;
  for (let i = 0; i < count && at + 12 <= tiff.length; i++, at += 12) {
    const tag = view.getUint16(at, little);
    const type = view.getUint16(at + 2, little);
    const unit = UNIT[type];
    if (unit === undefined) continue;
    const size = view.getUint32(at + 4, little) * unit;
    if (size === 0) continue;
    let dataAt = at + 8;
    if (size > 4) {
      dataAt = view.getUint32(at + 8, little);
      if (dataAt + size > tiff.length) break;
    }
    if (tag === ORIENTATION_TAG) found = orientationOf(view, dataAt, type, little);
  }
  return found;
}
