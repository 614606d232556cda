/**
 * Pair truncation, as HF tokenizers (Rust) does it for `longest_first`, which is what
 * sentence-transformers' CrossEncoder runs. Only content lengths are decided here; special tokens
 * are added afterwards and never cut.
 */

/**
 * How many tokens of each sequence `longest_first` keeps when at most `room` content tokens fit.
 *
 * If the shorter sequence fits in half the room it is kept whole and the longer one gets the rest;
 * otherwise both are cut to half, the longer one getting the odd token (the second one if they are
 * equally long). This is HF tokenizers' `truncate_encodings`; transformers' slow tokenizers, which
 * remove one token at a time, differ only in that odd-token tie-break.
 */
export function longestFirst(first: number, second: number, room: number): [number, number] {
  if (first + second <= room) return [first, second];
  const firstIsLonger = first > second;
  const short = firstIsLonger ? second : first;
  let keptShort: number;
  let keptLong: number;
  if (2 * short <= room) {
    keptShort = short;
    keptLong = room - short;
  } else {
    keptShort = Math.floor(room / 2);
    keptLong = room - keptShort;
  }
  return firstIsLonger ? [keptLong, keptShort] : [keptShort, keptLong];
}
