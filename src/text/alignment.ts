/**
 * Where each token of a text came from. The tokenizers library gives ids and token strings but no
 * offsets, so tokens are matched back to the text in order, the way a normaliser changed it:
 * ignoring case, accents and compatibility forms, and the control characters normalisers drop.
 * Offsets count Unicode code points (as Rust's `chars()` does, so TEI's offsets agree).
 */

export interface Span {
  /** First code point of the token in the text. */
  start: number;
  /** One past its last code point. */
  stop: number;
}

/** How far past the previous token a token may start: skips a word the tokenizer made [UNK]. */
const lookahead = 256;

const marks = /\p{M}/gu;
const whitespace = /^\s+$/u;
const dropped = /^[\p{Cc}\p{Cf}]*$/u;

/** A code point as normalisers see it: compatibility-decomposed, without accents, lower case. */
function fold(text: string): string {
  return text.normalize('NFKD').replace(marks, '').toLowerCase();
}

// Most text is ASCII, whose folding is a table look-up.
const asciiFolded = Array.from({ length: 128 }, (_, code) => String.fromCharCode(code).toLowerCase());
const foldChar = (char: string): string => {
  const code = char.charCodeAt(0);
  return code < 128 ? asciiFolded[code]! : fold(char);
};

/** A token string as it reads in the text: WordPiece marks word continuations with `##`. */
function surface(piece: string): string {
  const text = piece.startsWith('##') && piece.length > 2 ? piece.slice(2) : piece;
  return fold(text).trim();
}

/**
 * Spans of `pieces` (each token's text, in order) in `text`; null for a token that can not be
 * found there ([UNK], or a byte-level piece of a character).
 */
export function alignTokens(text: string, pieces: readonly string[]): (Span | null)[] {
  const folded = Array.from(text, foldChar);
  const isSpace = folded.map((f) => whitespace.test(f));
  // Characters a normaliser removes (accents left alone after folding, control characters).
  const isDropped = folded.map((f, i) => !isSpace[i] && dropped.test(f));

  const matchAt = (start: number, target: string): number => {
    let at = start;
    let matched = 0;
    while (matched < target.length) {
      if (at >= folded.length || isSpace[at]) return -1;
      if (isDropped[at]) {
        at++;
        continue;
      }
      const f = folded[at]!;
      if (!target.startsWith(f, matched)) return -1;
      matched += f.length;
      at++;
    }
    // Combining marks after the last character belong to it.
    while (at < folded.length && isDropped[at] && folded[at] === '') at++;
    return at;
  };

  let cursor = 0;
  return pieces.map((piece) => {
    const target = surface(piece);
    if (target.length === 0) return null;
    const last = Math.min(folded.length - 1, cursor + lookahead);
    for (let start = cursor; start <= last; start++) {
      if (isSpace[start] || isDropped[start]) continue;
      const stop = matchAt(start, target);
      if (stop >= 0) {
        cursor = stop;
        return { start, stop };
      }
    }
    return null;
  });
}
