/**
 * A faster BertNormalizer for @huggingface/tokenizers.
 *
 * The library cleans the text and spaces out CJK characters one character at a time, running a
 * regex or two per character: about a fifth of all tokenising time. The same edits as whole-string
 * regex replacements give identical text (the tests compare the ids with the library's on
 * multilingual edge cases) and tokenising about 1.5 times as fast overall.
 */
import * as tokenizers from '@huggingface/tokenizers';

/** The parts of the library's BertNormalizer replaced here. */
interface BertNormalizerSteps {
  clean_text(text: string): string;
  tokenize_chinese_chars(text: string): string;
}

// The package's type declarations re-export without file extensions, which NodeNext resolution
// does not follow, so the class is not typed: describe the part we use.
const { BertNormalizer } = tokenizers as unknown as { BertNormalizer: abstract new (...args: never[]) => BertNormalizerSteps };

// clean_text drops NUL, U+FFFD and every control, format, private-use or lone surrogate code
// point except tab, LF and CR, then turns each remaining whitespace character into a space.
// Dropping comes first: \v, \f and U+FEFF are both, and are dropped.
const DROPPED = /[\0\uFFFD]|(?![\t\n\r])[\p{Cc}\p{Cf}\p{Co}\p{Cs}]/gu;
// Without the u flag, as the library tests each character: only BMP whitespace exists anyway.
const WHITESPACE = /\s/g;
// The library looks at UTF-16 units, so only the BMP CJK blocks are spaced out.
const CJK = /[\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF]/g;

/** Replaces the per-character steps of a library BertNormalizer (`tokenizer.normalizer`) in place; false if it is not one. */
export function accelerateBertNormalizer(normalizer: unknown): boolean {
  if (!(normalizer instanceof BertNormalizer)) return false;
  normalizer.clean_text = (text) => text.replace(DROPPED, '').replace(WHITESPACE, ' ');
  normalizer.tokenize_chinese_chars = (text) => text.replace(CJK, ' $& ');
  return true;
}
