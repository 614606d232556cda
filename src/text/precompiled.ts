/**
 * The SentencePiece `Precompiled` normalizer of HF tokenizers, exactly.
 *
 * SentencePiece models (XLM-RoBERTa, T5, ...) carry their normalization rules (NFKC plus their
 * own) as a `precompiled_charsmap`: a darts-clone double-array trie over UTF-8 keys whose values
 * index NUL-terminated replacement strings. @huggingface/tokenizers approximates it with a few
 * regex replacements and NFKC, which gives other text than the rules for many characters; this
 * reads the rules themselves.
 *
 * It applies them the way HF tokenizers (the fast tokenizers of transformers and
 * sentence-transformers) does, which differs from sentencepiece's own longest match on some
 * decomposed (NFD) text: per extended grapheme cluster, a cluster shorter than 6 UTF-8 bytes that
 * some key prefixes is replaced whole by the replacement of the SHORTEST such key; otherwise each
 * character is looked up alone and kept unchanged when no key matches it.
 */

const graphemes = new Intl.Segmenter(undefined, { granularity: 'grapheme' });
/** Code units segmented at a time (see clusters()). */
const SEGMENT_WINDOW = 256;
const utf8 = new TextDecoder('utf-8');
// Text in which every character is a grapheme cluster of its own: ASCII but CR (CR LF is one cluster).
const SINGLE_CHAR_CLUSTERS = /^[^\r\u0080-\uffff]*$/;
const NO_MATCH = -1;

export class PrecompiledCharsmap {
  private readonly units: Uint32Array;
  private readonly replacements: Uint8Array;
  private readonly decoded = new Map<number, string>();

  /** `blob`: u32 LE trie size in bytes, the trie's u32 LE units, then the replacement strings. */
  constructor(blob: Uint8Array) {
    if (blob.length < 4) throw new Error('precompiled_charsmap: too short');
    const view = new DataView(blob.buffer, blob.byteOffset, blob.byteLength);
    const trieSize = view.getUint32(0, true);
    if (trieSize % 4 !== 0 || trieSize < 4 || 4 + trieSize > blob.length)
      throw new Error(`precompiled_charsmap: bad trie size ${trieSize}`);
    this.units = new Uint32Array(trieSize / 4);
    for (let i = 0; i < this.units.length; i++) this.units[i] = view.getUint32(4 + 4 * i, true);
    this.replacements = blob.subarray(4 + trieSize);
  }

  static fromBase64(charsmap: string): PrecompiledCharsmap {
    return new PrecompiledCharsmap(Buffer.from(charsmap, 'base64'));
  }

  normalize(text: string): string {
    if (!this.matchesAnywhere(text)) return text;
    let out = '';
    if (SINGLE_CHAR_CLUSTERS.test(text)) {
      for (let i = 0; i < text.length; i++) out += this.char(text, i, i + 1);
      return out;
    }
    for (const { segment, index } of text.length <= SEGMENT_WINDOW ? graphemes.segment(text) : clusters(text)) {
      const end = index + segment.length;
      if (utf8Length(segment) < 6) {
        const value = this.shortest(text, index, end);
        if (value !== NO_MATCH) {
          out += this.replacement(value);
          continue;
        }
      }
      for (let i = index; i < end;) {
        const next = i + (isSurrogatePair(text, i) ? 2 : 1);
        out += this.char(text, i, next);
        i = next;
      }
    }
    return out;
  }

  /** The character at text[start, end) looked up alone. */
  private char(text: string, start: number, end: number): string {
    const value = this.shortest(text, start, end);
    return value === NO_MATCH ? text.slice(start, end) : this.replacement(value);
  }

  /** Whether a key starts at some character of the text: if none does, the text stays as it is. */
  private matchesAnywhere(text: string): boolean {
    for (let i = 0; i < text.length; i += isSurrogatePair(text, i) ? 2 : 1) {
      if (this.shortest(text, i, text.length) !== NO_MATCH) return true;
    }
    return false;
  }

  /**
   * The value of the shortest key that prefixes the UTF-8 bytes of text[start, end), or NO_MATCH.
   * A darts-clone unit: bit 8 marks a leaf below, bits 10-31 (shifted by 8 if bit 9) an offset,
   * bits 0-7 and 31 the label; a leaf unit holds the value in bits 0-30.
   */
  private shortest(text: string, start: number, end: number): number {
    const units = this.units;
    let node = offset(units[0]!);
    for (let i = start; i < end;) {
      let code = text.charCodeAt(i++);
      if (code >= 0xd800 && code <= 0xdbff && i < end && isLowSurrogate(text.charCodeAt(i))) {
        code = 0x10000 + ((code - 0xd800) << 10) + (text.charCodeAt(i++) - 0xdc00);
      } else if (code >= 0xd800 && code <= 0xdfff) {
        code = 0xfffd; // A lone surrogate reaches HF tokenizers as U+FFFD.
      }
      // The UTF-8 bytes of the code point, one at a time.
      const n = code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
      for (let k = n - 1; k >= 0; k--) {
        const byte =
          n === 1 ? code : k === n - 1 ? ((0xf00 >> n) & 0xff) | (code >> (6 * k)) : 0x80 | ((code >> (6 * k)) & 0x3f);
        // Keys are NUL-terminated: a NUL byte ends the search.
        if (byte === 0) return NO_MATCH;
        node ^= byte;
        const unit = units[node];
        if (unit === undefined || (unit & 0x800000ff) !== byte) return NO_MATCH;
        node ^= offset(unit);
        if ((unit >>> 8) & 1) return units[node]! & 0x7fffffff;
      }
    }
    return NO_MATCH;
  }

  private replacement(value: number): string {
    let text = this.decoded.get(value);
    if (text === undefined) {
      const end = this.replacements.indexOf(0, value);
      text = utf8.decode(this.replacements.subarray(value, end < 0 ? this.replacements.length : end));
      this.decoded.set(value, text);
    }
    return text;
  }
}

/**
 * The extended grapheme clusters of `text`, with where each starts. Iterating Intl.Segmenter's
 * segments takes time quadratic in their number (each step costs about the text's length in V8), so
 * the text is segmented a window at a time: a window's clusters are kept but its last, which may go
 * on past the window, and the next window starts where that one starts. A start of a cluster is a
 * boundary whatever comes before it (regional indicators pair up from there), so the clusters are
 * those of the whole text. A cluster wider than the window widens it.
 */
export function* clusters(text: string, window = SEGMENT_WINDOW): Generator<{ segment: string; index: number }> {
  let start = 0;
  let width = window;
  while (start < text.length) {
    let end = Math.min(text.length, start + width);
    // A window never ends inside a surrogate pair: half a character would end the cluster before it.
    if (end < text.length && isSurrogatePair(text, end - 1)) end++;
    let last: Intl.SegmentData | undefined;
    let kept = 0;
    for (const data of graphemes.segment(text.slice(start, end))) {
      if (last) {
        yield { segment: last.segment, index: start + last.index };
        kept++;
      }
      last = data;
    }
    if (end === text.length) {
      yield { segment: last!.segment, index: start + last!.index };
      return;
    }
    if (kept === 0) {
      width *= 2;
    } else {
      start += last!.index;
      width = window;
    }
  }
}

function offset(unit: number): number {
  return (unit >>> 10) << ((unit & (1 << 9)) >>> 6);
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

function isSurrogatePair(text: string, i: number): boolean {
  const code = text.charCodeAt(i);
  return code >= 0xd800 && code <= 0xdbff && isLowSurrogate(text.charCodeAt(i + 1));
}

function utf8Length(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) n += 1;
    else if (code < 0x800) n += 2;
    else if (code >= 0xd800 && code <= 0xdbff && isSurrogatePair(text, i)) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}
