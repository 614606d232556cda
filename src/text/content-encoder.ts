/**
 * Content ids of a text through the library's own normalizer, pre-tokenizer and model, without its
 * general-purpose glue, and with a cache of the ids of each word.
 *
 * Tokenising is most of the main thread's work per embeddings request. The library's `encode`
 * splits the text on added tokens with a character trie, builds arrays of arrays with `flatMap`,
 * maps every token string to its id through two maps, and runs the model on every word again
 * although a corpus repeats its words endlessly. This runs the same stages in the same order for
 * the common case (no added token in the text) and caches each word's ids, since the models
 * (WordPiece, Unigram, BPE) encode each pre-tokenized word independently. Any text the fast path
 * can not prove equivalent for (an added token inside it, a model that fuses unknowns across words,
 * the legacy `remove_space` options) goes through the library as before, and the tests compare both
 * paths on multilingual edge cases.
 */
import { ChunkTable, type IdSink } from './chunk-table.js';
import { isBertLike, type LibraryTokenizer } from './library-patches.js';

/** Longer words are not cached (a text's rare long strings would fill the cache). */
const CACHED_WORD_LENGTH = 48;
/** Distinct words kept; the cache starts over when full (a vocabulary of real text fits many times). */
const CACHED_WORDS = 100_000;

export type ContentEncoder = (text: string) => Int32Array | undefined;

/** A fast encoder for `tokenizer`, or undefined when its configuration needs the library's own path. */
export function contentEncoder(tokenizer: LibraryTokenizer): ContentEncoder | undefined {
  const { normalizer, pre_tokenizer: preTokenizer, model } = tokenizer;
  if (tokenizer.remove_space === true || tokenizer.do_lowercase_and_remove_accent === true) return undefined;
  // The library fuses unknown tokens across a section's words, not per word: no per-word cache then.
  if (model.fuse_unk === true) return undefined;
  const vocab = model.tokens_to_ids;
  const unk = model.unk_token_id;
  // Added tokens are matched in the raw text (or, for `normalized` ones, in the normalized text).
  const rawAdded = containsAny(
    tokenizer.added_tokens.filter((t) => !(t.normalized && normalizer)).map((t) => t.content),
  );
  const normalizedContents = tokenizer.added_tokens
    .filter((t) => t.normalized && normalizer)
    .map((t) => normalizer!(t.content));
  const normalizedAdded = containsAny(normalizedContents);

  const cache = new Map<string, Int32Array>();
  const chunks = new ChunkTable(CACHED_WORDS);
  // One growing buffer for every text (encoding is synchronous); each result is a copy of its part.
  const ids = new IdList();
  const one: string[] = [''];

  const wordIds = (word: string): Int32Array => {
    one[0] = word;
    const pieces = model(one);
    const out = new Int32Array(pieces.length);
    for (let i = 0; i < pieces.length; i++) {
      // As the library: a piece without an id (a model with no unknown token) becomes 0.
      out[i] = vocab.get(pieces[i]!) ?? unk ?? 0;
    }
    return out;
  };

  /** Ids of one pre-tokenized word, from the cache or computed and cached. */
  const cachedWord = (word: string): Int32Array => {
    let piece = cache.get(word);
    if (piece === undefined) {
      piece = wordIds(word);
      if (cache.size >= CACHED_WORDS) cache.clear();
      // A copy, so that the key does not keep the whole text alive (V8 slices are views).
      cache.set(word.length > 12 ? flatCopy(word) : word, piece);
    }
    return piece;
  };

  // BertNormalizer and BertPreTokenizer act on each character and split at whitespace, so a text's
  // ids are the ids of its whitespace-separated chunks, each normalized and pre-tokenized alone.
  // The cache then holds raw chunks, and a cached chunk skips normalizing and pre-tokenizing too.
  // (An added token matched after normalizing is looked for in each chunk, so it must not span one.)
  const local = isBertLike(tokenizer) && !normalizedContents.some((content) => /\s/.test(content));
  const chunkIds = (chunk: string): Int32Array | undefined => {
    const normalized = normalizer ? normalizer(chunk) : chunk;
    if (normalizedAdded?.test(normalized)) return undefined;
    const words = normalized.length === 0 ? [] : preTokenizer!(normalized, { section_index: 0 });
    if (words.length === 1) return wordIds(words[0]!);
    return concat(words.map(wordIds));
  };

  return (text) => {
    if (rawAdded?.test(text)) return undefined;
    const out = ids.reset();
    if (local) {
      // Each chunk is hashed as it is scanned and looked up in place: no string per chunk on a hit.
      let start = -1;
      let hash = ChunkTable.seed;
      for (let i = 0; i <= text.length; i++) {
        const code = i < text.length ? text.charCodeAt(i) : 32;
        if (code === 32 || code === 9 || code === 10 || code === 13) {
          if (start >= 0 && !chunks.get(text, start, i, hash, out)) {
            const piece = chunkIds(text.slice(start, i));
            if (piece === undefined) return undefined;
            if (i - start <= CACHED_WORD_LENGTH) chunks.set(text, start, i, hash, piece);
            out.push(piece);
          }
          start = -1;
        } else {
          if (start < 0) {
            start = i;
            hash = ChunkTable.seed;
          }
          hash = ChunkTable.step(hash, code);
        }
      }
      return out.take();
    }
    const normalized = normalizer ? normalizer(text) : text;
    if (normalized.length === 0) return new Int32Array(0);
    if (normalizedAdded?.test(normalized)) return undefined;
    const words = preTokenizer ? preTokenizer(normalized, { section_index: 0 }) : [normalized];
    for (const word of words) out.push(word.length <= CACHED_WORD_LENGTH ? cachedWord(word) : wordIds(word));
    return out.take();
  };
}

/** A growing list of ids, copied out once. */
class IdList implements IdSink {
  private ids = new Int32Array(256);
  private length = 0;

  reset(): this {
    this.length = 0;
    return this;
  }

  push(piece: Int32Array): void {
    this.append(piece, 0, piece.length);
  }

  append(source: Int32Array, start: number, count: number): void {
    const end = this.length + count;
    if (end > this.ids.length) this.grow(end);
    const ids = this.ids;
    for (let i = 0; i < count; i++) ids[this.length + i] = source[start + i]!;
    this.length = end;
  }

  take(): Int32Array {
    return this.ids.slice(0, this.length);
  }

  private grow(end: number): void {
    const grown = new Int32Array(Math.max(this.ids.length * 2, end));
    grown.set(this.ids.subarray(0, this.length));
    this.ids = grown;
  }
}

function concat(pieces: Int32Array[]): Int32Array {
  const list = new IdList();
  for (const piece of pieces) list.push(piece);
  return list.take();
}

function flatCopy(s: string): string {
  return Buffer.from(s, 'utf16le').toString('utf16le');
}

/** A regex that finds any of `contents` in a text, or undefined when there are none. */
function containsAny(contents: string[]): RegExp | undefined {
  const present = contents.filter((c) => c.length > 0);
  if (present.length === 0) return undefined;
  return new RegExp(present.map((c) => c.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'u');
}
