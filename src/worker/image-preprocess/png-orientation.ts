/**
 * The orientation Pillow 9.4 finds in a PNG, which `ImageOps.exif_transpose` then applies. Besides
 * the eXIf chunk, Pillow's `getexif` reads two places other software writes it:
 * - a "Raw profile type exif" text chunk (tEXt, zTXt or iTXt), ImageMagick's: the EXIF block as hex
 *   after three lines of header, read where no "exif" entry exists;
 * - XMP (the "XML:com.adobe.xmp" text chunk): the first `tiff:Orientation="N` or
 *   `tiff:Orientation>N` (one digit), read only where the EXIF has no orientation tag.
 * A text chunk sets its key, a later one of the same key replacing it, as Pillow's `info` does;
 * chunks after the image data count only where no "exif" entry was found before it (Pillow reads
 * them when `getexif` loads the image, which it skips when it has EXIF already). Malformed chunks
 * are ignored where Pillow ignores them, and also where Pillow refuses the whole file (a wrong
 * checksum before the image data, a zTXt of an unknown compression, text past Pillow's limits,
 * hex or EXIF it can not parse): then the chunk, or the EXIF, is as if absent. Never throws.
 */
import { constants, crc32, inflateSync } from 'node:zlib';
import { exifOrientation, withoutExifPrefix, type Orientation } from './exif.js';

/** Pillow's limit on one inflated text chunk (ImageFile.SAFEBLOCK): a larger one fails its read. */
const MAX_TEXT_CHUNK = 1024 * 1024;
/** Pillow's limit on all text read from one file: past it, the file fails its read. */
const MAX_TEXT_MEMORY = 64 * MAX_TEXT_CHUNK;

const EXIF_KEY = 'exif';
const RAW_PROFILE_KEY = 'Raw profile type exif';
const XMP_KEY = 'XML:com.adobe.xmp';

/**
 * An `info` entry as Pillow holds it: text (here its bytes), or bytes for an "exif" entry from a
 * tEXt chunk (whose "Exif\0\0" Pillow strips) or an eXIf chunk (to which Pillow adds one first).
 * A text "exif" entry (zTXt, iTXt) is one Pillow's `Exif.load` can not read.
 */
interface Entry {
  value: Uint8Array;
  kind: 'text' | 'bytes' | 'eXIf';
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function validUtf8(bytes: Uint8Array): boolean {
  try {
    utf8.decode(bytes);
    return true;
  } catch {
    return false;
  }
}

/**
 * zlib data inflated as Pillow's `_safe_zlib_decompress` does: a stream cut short gives what it
 * holds; corrupt data gives null; more than MAX_TEXT_CHUNK bytes, undefined (Pillow refuses the file).
 */
function inflateText(data: Uint8Array): Uint8Array | null | undefined {
  try {
    return inflateSync(data, { maxOutputLength: MAX_TEXT_CHUNK, finishFlush: constants.Z_SYNC_FLUSH });
  } catch (error) {
    return (error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE' ? undefined : null;
  }
}

const name = (bytes: Uint8Array) => String.fromCharCode(...bytes);

/** Chunk types Pillow reads on: four ASCII letters, digits or underscores. */
const isChunkType = (bytes: Uint8Array) =>
  bytes.every((b) => (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || b === 0x5f);

/** [key, value] of a text chunk, or undefined where Pillow sets nothing for it; text counts the inflated bytes. */
function readText(type: string, body: Uint8Array, text: { bytes: number }): [string, Entry] | undefined {
  const nul = body.indexOf(0);
  const keyLength = nul < 0 ? body.length : nul;
  if (keyLength > RAW_PROFILE_KEY.length) return undefined;
  const key = name(body.subarray(0, keyLength));
  // Inflating only what can matter here, so a file of many compressed chunks costs nothing.
  if (key !== EXIF_KEY && key !== RAW_PROFILE_KEY && key !== XMP_KEY) return undefined;
  const rest = nul < 0 ? new Uint8Array(0) : body.subarray(nul + 1);
  if (type === 'tEXt') return [key, { value: rest, kind: key === EXIF_KEY ? 'bytes' : 'text' }];
  if (type === 'zTXt') {
    if (rest.length > 0 && rest[0] !== 0) return undefined;
    const inflated = inflateText(rest.subarray(1));
    if (inflated === undefined) return undefined;
    text.bytes += inflated?.length ?? 0;
    return [key, { value: inflated ?? new Uint8Array(0), kind: 'text' }];
  }
  // iTXt: compression flag and method, then language and translated keyword, each NUL-terminated.
  if (rest.length < 2) return undefined;
  const [flag, method] = [rest[0]!, rest[1]!];
  const language = rest.indexOf(0, 2);
  const translated = language < 0 ? -1 : rest.indexOf(0, language + 1);
  if (translated < 0) return undefined;
  let value: Uint8Array | null | undefined = rest.subarray(translated + 1);
  if (flag !== 0) {
    if (method !== 0) return undefined;
    value = inflateText(value);
    if (!value) return undefined;
    text.bytes += value.length;
  }
  if (!validUtf8(rest.subarray(2, translated)) || !validUtf8(value)) return undefined;
  return [key, { value, kind: 'text' }];
}

/** Python's `bytes.fromhex` of the text after a raw profile's third line break, or undefined where it fails. */
function rawProfileBytes(profile: Uint8Array): Uint8Array | undefined {
  let at = 0;
  for (let line = 0; line < 3; line++) {
    const next = profile.indexOf(0x0a, at);
    if (next < 0) return new Uint8Array(0);
    at = next + 1;
  }
  const hex = profile.subarray(at).filter((b) => b !== 0x0a);
  const out = new Uint8Array(hex.length >> 1);
  let n = 0;
  const digit = (b: number) =>
    b >= 0x30 && b <= 0x39 ? b - 0x30 : b >= 0x61 && b <= 0x66 ? b - 0x57 : b >= 0x41 && b <= 0x46 ? b - 0x37 : -1;
  for (let i = 0; i < hex.length;) {
    const b = hex[i]!;
    if (b === 0x20 || (b >= 0x09 && b <= 0x0d)) {
      i++;
      continue;
    }
    const high = digit(b);
    const low = i + 1 < hex.length ? digit(hex[i + 1]!) : -1;
    if (high < 0 || low < 0) return undefined;
    out[n++] = (high << 4) | low;
    i += 2;
  }
  return out.subarray(0, n);
}

/** Pillow's `re.search(r'tiff:Orientation(="|>)([0-9])', xmp)`: the digit, or undefined. */
function xmpOrientation(xmp: Uint8Array): number | undefined {
  const needle = Buffer.from('tiff:Orientation');
  const text = Buffer.from(xmp.buffer, xmp.byteOffset, xmp.byteLength);
  for (let at = text.indexOf(needle); at >= 0; at = text.indexOf(needle, at + 1)) {
    let next = at + needle.length;
    if (text[next] === 0x3d && text[next + 1] === 0x22) next += 2;
    else if (text[next] === 0x3e) next += 1;
    else continue;
    const digit = text[next];
    if (digit !== undefined && digit >= 0x30 && digit <= 0x39) return digit - 0x30;
  }
  return undefined;
}

/** The orientation `exif_transpose` applies to this PNG (1 where none, or none it acts on). */
export function pngOrientation(png: Uint8Array): Orientation {
  const view = new DataView(png.buffer, png.byteOffset, png.byteLength);
  const entries = new Map<string, Entry>();
  const text = { bytes: 0 };
  let afterImageData = false;
  let animated = false;
  let frameControlBefore = false;
  let frames: number | undefined;
  for (let at = 8; at + 8 <= png.length;) {
    const length = view.getUint32(at);
    const typeBytes = png.subarray(at + 4, at + 8);
    const end = at + 12 + length;
    if (!isChunkType(typeBytes) || end > png.length) break;
    const type = name(typeBytes);
    const body = png.subarray(at + 8, at + 8 + length);
    at = end;
    if (type === 'IEND') break;
    if (type === 'IDAT' || type === 'fdAT') {
      if (!afterImageData) {
        // Pillow stops here on opening; getexif reads on only where it found no EXIF.
        if (entries.has(EXIF_KEY)) break;
        afterImageData = true;
        animated = frames !== undefined && (frames > 1 || !frameControlBefore);
      }
      continue;
    }
    // Before the image data a wrong checksum fails Pillow's open; after it, Pillow does not check.
    if (!afterImageData && crc32(png.subarray(end - length - 8, end - 4)) !== view.getUint32(end - 4)) continue;
    if (type === 'fcTL') {
      // An animation's next frame: Pillow's load stops there.
      if (afterImageData && animated) break;
      frameControlBefore = true;
    } else if (type === 'acTL' && !afterImageData && length >= 8) {
      const count = view.getUint32(end - 4 - length);
      frames = frames !== undefined ? undefined : count === 0 || count > 0x80000000 ? frames : count;
    } else if (type === 'eXIf') {
      entries.set(EXIF_KEY, { value: body, kind: 'eXIf' });
    } else if (type === 'tEXt' || type === 'zTXt' || type === 'iTXt') {
      const read = readText(type, body, text);
      if (read) entries.set(...read);
      if (text.bytes > MAX_TEXT_MEMORY) return 1;
    }
  }

  let orientation: Orientation | undefined;
  const exif = entries.get(EXIF_KEY);
  const raw = entries.get(RAW_PROFILE_KEY);
  if (exif) {
    if (exif.kind === 'eXIf') orientation = exifOrientation(exif.value);
    else if (exif.kind === 'bytes') orientation = exifOrientation(withoutExifPrefix(exif.value));
  } else if (raw) {
    const block = rawProfileBytes(raw.value);
    if (block) orientation = exifOrientation(withoutExifPrefix(block));
  }
  if (orientation === undefined) {
    const xmp = entries.get(XMP_KEY);
    const digit = xmp && xmp.value.length > 0 ? xmpOrientation(xmp.value) : undefined;
    if (digit !== undefined) orientation = digit >= 2 && digit <= 8 ? (digit as Orientation) : 1;
  }
  return orientation ?? 1;
}
