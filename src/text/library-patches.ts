/**
 * The one place that reaches into @huggingface/tokenizers' own classes. The library reads
 * tokenizer.json; where it differs from HF tokenizers (Rust), which sentence-transformers runs, or
 * is slow, a part of each loaded tokenizer is replaced in place with an exact one from this folder:
 *
 *   BertNormalizer `normalize`                  bert-normalizer.ts  faster; astral CJK, per-character lowercasing
 *   Lowercase normalizer `normalize`            bert-normalizer.ts  per-character lowercasing
 *   Precompiled normalizer `normalize`          precompiled.ts      SentencePiece's charsmap, exactly
 *   ByteLevel pre-tokenizer `pattern`           byte-level.ts       Unicode White_Space, as Oniguruma's \s
 *   WordPiece model `encode`                    wordpiece.ts        the same pieces, 3-4 times faster
 *   Unigram model `encode`, `tokenize`, `trie`  unigram.ts          HF's tie-breaking, compact trie
 *
 * These members are the library's internals, not its API: the library is pinned to an exact
 * version in package.json, the members read and replaced are typed below, and
 * checkLibraryPatches() (run before the first tokenizer is made, and by the tests) proves on
 * small tokenizers that each patch applies and that the library's encode goes through it, so a
 * library that moved a member stops the start instead of changing the vectors.
 */
import * as tokenizers from '@huggingface/tokenizers';
import { bertNormalizer, lowercasePerCharacter } from './bert-normalizer.js';
import { GPT2_SPLIT } from './byte-level.js';
import { PrecompiledCharsmap } from './precompiled.js';
import { unigramSegmenter } from './unigram.js';
import { wordPieceEncoder } from './wordpiece.js';

/** Normalizers are callable; the call goes through `normalize`. */
export interface LibraryNormalizer {
  (text: string): string;
  normalize(text: string): string;
}
interface BertNormalizer extends LibraryNormalizer {
  config: { clean_text?: boolean; handle_chinese_chars?: boolean; lowercase?: boolean; strip_accents?: boolean | null };
}
interface PrecompiledNormalizer extends LibraryNormalizer {
  charsmap: string | null;
}
interface SequenceNormalizer extends LibraryNormalizer {
  normalizers: unknown[];
}

/** Pre-tokenizers are callable on a section of text. */
export type LibraryPreTokenizer = (text: string, options: { section_index: number }) => string[];
interface ByteLevelPreTokenizer extends LibraryPreTokenizer {
  pattern: RegExp;
}
interface SequencePreTokenizer extends LibraryPreTokenizer {
  tokenizers: unknown[];
}

/** Models are callable on a section's words; the call goes through `encode` (then fuses unknowns if told). */
export interface LibraryModel {
  (words: string[]): string[];
  encode(words: string[]): string[];
  tokens_to_ids: Map<string, number>;
  unk_token_id?: number;
  fuse_unk?: boolean;
}
interface WordPieceModel extends LibraryModel {
  config: { continuing_subword_prefix?: unknown };
  unk_token?: string;
  max_input_chars_per_word: number;
}
interface UnigramModel extends LibraryModel {
  config: { vocab: [string, number][]; unk_id?: number };
  trie: unknown;
  tokenize(normalized: string): string[];
}

/** A loaded tokenizer: what tokenizer.ts and content-encoder.ts use of it. */
export interface LibraryTokenizer {
  normalizer: LibraryNormalizer | null;
  pre_tokenizer: LibraryPreTokenizer | null;
  model: LibraryModel;
  added_tokens: Array<{ content: string; normalized: boolean }>;
  /** Options of legacy tokenizers that the fast path does not follow. */
  remove_space?: unknown;
  do_lowercase_and_remove_accent?: unknown;
  encode(
    text: string,
    options?: { add_special_tokens?: boolean; text_pair?: string; return_token_type_ids?: boolean },
  ): { ids: number[]; token_type_ids?: number[] };
  tokenize(text: string): string[];
  decode(ids: number[], options: { skip_special_tokens: boolean }): string;
  token_to_id(token: string): number | undefined;
}

type Class<T> = abstract new (...args: never[]) => T;

// The package's type declarations re-export without file extensions, which NodeNext resolution
// does not follow, so its classes come in untyped: typed here by the members used.
const library = tokenizers as unknown as {
  Tokenizer: new (json: object, config: object) => LibraryTokenizer;
  BertNormalizer: Class<BertNormalizer>;
  LowercaseNormalizer: Class<LibraryNormalizer>;
  PrecompiledNormalizer: Class<PrecompiledNormalizer>;
  SequenceNormalizer: Class<SequenceNormalizer>;
  BertPreTokenizer: Class<LibraryPreTokenizer>;
  ByteLevelPreTokenizer: Class<ByteLevelPreTokenizer>;
  SequencePreTokenizer: Class<SequencePreTokenizer>;
  WordPiece: Class<WordPieceModel>;
  Unigram: Class<UnigramModel>;
};

/** How many parts of a tokenizer each patch replaced. */
export interface Patched {
  bertNormalizer: number;
  lowercase: number;
  precompiled: number;
  byteLevel: number;
  wordPiece: number;
  unigram: number;
}

/** The library's tokenizer of a tokenizer.json and tokenizer_config.json, patched. */
/** The library's tokenizer as shipped, none of the patches applied: the reference the benchmarks measure against. */
export const ShippedTokenizer: new (json: object, config: object) => LibraryTokenizer = library.Tokenizer;

export function loadLibraryTokenizer(json: object, config: object): { tokenizer: LibraryTokenizer; patched: Patched } {
  checkLibraryPatches();
  const tokenizer = new library.Tokenizer(json, config);
  return { tokenizer, patched: patch(tokenizer) };
}

/** Whether the tokenizer normalizes and splits as BERT does (content-encoder.ts caches per whitespace chunk then). */
export function isBertLike(tokenizer: LibraryTokenizer): boolean {
  const { normalizer, pre_tokenizer: preTokenizer } = tokenizer;
  return (
    (normalizer === null || normalizer instanceof library.BertNormalizer) &&
    preTokenizer instanceof library.BertPreTokenizer
  );
}

function patch(tokenizer: LibraryTokenizer): Patched {
  const patched: Patched = { bertNormalizer: 0, lowercase: 0, precompiled: 0, byteLevel: 0, wordPiece: 0, unigram: 0 };
  const { normalizer, pre_tokenizer: preTokenizer, model } = tokenizer;
  // Same output, faster: the library's per-character loops dominate tokenising time.
  if (normalizer instanceof library.BertNormalizer) {
    const {
      clean_text: clean,
      handle_chinese_chars: chinese,
      lowercase,
      strip_accents: stripAccents,
    } = normalizer.config;
    normalizer.normalize = bertNormalizer({ clean, chinese, lowercase, stripAccents: stripAccents ?? lowercase });
    patched.bertNormalizer++;
  }
  // The library lowercases with JavaScript's toLowerCase, whose final sigma HF tokenizers does not have (CLIP, SigLIP).
  for (const part of sequence(normalizer, library.SequenceNormalizer, (s) => s.normalizers)) {
    if (!(part instanceof library.LowercaseNormalizer)) continue;
    part.normalize = lowercasePerCharacter;
    patched.lowercase++;
  }
  // The library only approximates SentencePiece's charsmap.
  for (const part of sequence(normalizer, library.SequenceNormalizer, (s) => s.normalizers)) {
    if (!(part instanceof library.PrecompiledNormalizer)) continue;
    const exact = part.charsmap ? PrecompiledCharsmap.fromBase64(part.charsmap) : undefined;
    // No rules: HF tokenizers leaves the text as it is.
    part.normalize = exact ? (text) => exact.normalize(text) : (text) => text;
    patched.precompiled++;
  }
  // The library's GPT-2 split regex uses JavaScript's whitespace, not Unicode's.
  for (const part of sequence(preTokenizer, library.SequencePreTokenizer, (s) => s.tokenizers)) {
    if (!(part instanceof library.ByteLevelPreTokenizer)) continue;
    part.pattern = GPT2_SPLIT;
    patched.byteLevel++;
  }
  if (model instanceof library.WordPiece) {
    const prefix = model.config.continuing_subword_prefix;
    const unk = model.unk_token;
    // Without a prefix the library glues "undefined" on: leave such a model as it is. The map is
    // read after the Tokenizer constructor, which adds the added tokens to it.
    if (typeof prefix === 'string' && unk !== undefined) {
      model.encode = wordPieceEncoder(model.tokens_to_ids, prefix, unk, model.max_input_chars_per_word);
      patched.wordPiece++;
    }
  }
  // The library breaks ties between equal segmentations otherwise than HF tokenizers. Without an
  // unknown token HF tokenizers fails on unknown characters; the library's way stays then.
  if (model instanceof library.Unigram && Number.isInteger(model.config.unk_id)) {
    const tokenize = unigramSegmenter(model.config.vocab, model.config.unk_id!);
    model.tokenize = tokenize;
    // The library's encode pushes a word's pieces with push(...pieces), which overflows the stack
    // on a word of some 100,000 pieces.
    model.encode = (words) => {
      const pieces: string[] = [];
      for (const word of words) for (const piece of tokenize(word)) pieces.push(piece);
      return pieces;
    };
    model.trie = undefined;
    patched.unigram++;
  }
  return patched;
}

/** `part` and, when it is a Sequence, the parts inside it. */
function sequence<S>(part: unknown, sequenceClass: Class<S>, inner: (sequence: S) => unknown[]): unknown[] {
  return part instanceof sequenceClass
    ? (inner(part) ?? []).flatMap((item) => sequence(item, sequenceClass, inner))
    : [part];
}

let checked = false;

/**
 * Proves each patch on a small tokenizer: it applies (the classes and members are where they were)
 * and the library's own encode goes through it (the output is the patch's, or the replaced member
 * is called). Throws, naming the patch, when not; runs once.
 */
export function checkLibraryPatches(): void {
  if (checked) return;
  const failures: string[] = [];
  const expect = (patch: string, ok: boolean, what: string) => {
    if (!ok) failures.push(`${patch}: ${what}`);
  };

  // BERT: BertNormalizer and WordPiece. The library leaves an astral CJK ideograph unspaced and
  // lowercases a final capital sigma to ς; the patch spaces it out and gives σ.
  const bert = tokenizer({
    normalizer: {
      type: 'BertNormalizer',
      clean_text: true,
      handle_chinese_chars: true,
      strip_accents: null,
      lowercase: true,
    },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    model: {
      type: 'WordPiece',
      unk_token: '[UNK]',
      continuing_subword_prefix: '##',
      max_input_chars_per_word: 100,
      vocab: { '[UNK]': 0, a: 1, '##b': 2, '\u{20000}': 3, aσ: 4 },
    },
  });
  expect('bertNormalizer', bert.patched.bertNormalizer === 1, 'not applied');
  expect('wordPiece', bert.patched.wordPiece === 1, 'not applied');
  const wordPieceCalls = counted(bert.tokenizer.model, 'encode');
  expect(
    'bertNormalizer',
    same(bert.tokenizer.encode('AB\u{20000}AΣ', CONTENT).ids, [1, 2, 3, 4]),
    "the library's encode does not use it",
  );
  expect('wordPiece', wordPieceCalls() > 0, "the library's encode does not call it");

  // Lowercase (inside a Sequence): a final capital sigma becomes σ.
  const lower = tokenizer({
    normalizer: { type: 'Sequence', normalizers: [{ type: 'Lowercase' }] },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    model: {
      type: 'WordPiece',
      unk_token: '[UNK]',
      continuing_subword_prefix: '##',
      max_input_chars_per_word: 100,
      vocab: { '[UNK]': 0, aσ: 1 },
    },
  });
  expect('lowercase', lower.patched.lowercase === 1, 'not applied');
  expect('lowercase', same(lower.tokenizer.encode('AΣ', CONTENT).ids, [1]), "the library's encode does not use it");

  // SentencePiece: a Precompiled normalizer without rules (inside a Sequence) and Unigram. The
  // library applies NFKC (ﬁ -> fi) where HF tokenizers leaves the text as it is.
  const unigram = tokenizer({
    normalizer: { type: 'Sequence', normalizers: [{ type: 'Precompiled', precompiled_charsmap: null }] },
    model: {
      type: 'Unigram',
      unk_id: 0,
      vocab: [
        ['<unk>', 0],
        ['\uFB01', -1],
        ['f', -2],
        ['i', -2],
      ],
    },
  });
  expect('precompiled', unigram.patched.precompiled === 1, 'not applied');
  expect('unigram', unigram.patched.unigram === 1, 'not applied');
  const unigramCalls = counted(unigram.tokenizer.model, 'encode');
  expect(
    'precompiled',
    same(unigram.tokenizer.encode('\uFB01', CONTENT).ids, [1]),
    "the library's encode does not use it",
  );
  expect('unigram', unigramCalls() > 0, "the library's encode does not call it");

  // Byte-level BPE: U+FEFF is no whitespace to Unicode, so " \uFEFF" is one piece, not two.
  const byteLevel = tokenizer({
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [{ type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true }],
    },
    model: { type: 'BPE', vocab: { x: 0 }, merges: [] },
  });
  expect('byteLevel', byteLevel.patched.byteLevel === 1, 'not applied');
  const pieces = byteLevel.tokenizer.pre_tokenizer?.('x \uFEFFy', { section_index: 0 }) ?? [];
  expect('byteLevel', pieces.length === 3, `the library's pre-tokenizer does not use it (${pieces.length} pieces)`);

  if (failures.length > 0) {
    throw new Error(
      `@huggingface/tokenizers is not the version these patches were written for (text/library-patches.ts): ${failures.join('; ')}.`,
    );
  }
  checked = true;
}

const CONTENT = Object.freeze({ add_special_tokens: false });

function tokenizer(parts: object): { tokenizer: LibraryTokenizer; patched: Patched } {
  const json = {
    version: '1.0',
    added_tokens: [],
    normalizer: null,
    pre_tokenizer: null,
    post_processor: null,
    decoder: null,
    ...parts,
  };
  const made = new library.Tokenizer(json, {});
  return { tokenizer: made, patched: patch(made) };
}

/** Wraps `object[name]` to count its calls; returns the count so far. */
function counted<K extends string>(object: Record<K, (...args: never[]) => unknown>, name: K): () => number {
  let calls = 0;
  const original = object[name];
  object[name] = (...args: never[]) => {
    calls++;
    return original.apply(object, args);
  };
  return () => calls;
}

function same(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((value, i) => value === b[i]);
}
