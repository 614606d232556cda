/**
 * The ByteLevel pre-tokenizer's regex as HF tokenizers has it (library-patches.ts gives it to the
 * library's ByteLevel pre-tokenizers).
 *
 * With `use_regex`, ByteLevel splits text with GPT-2's pattern. HF tokenizers compiles it with
 * Oniguruma, whose `\s` is Unicode White_Space; @huggingface/tokenizers uses JavaScript's `\s`,
 * which counts U+FEFF (BOM) as whitespace and not U+0085 (NEL). A space before either then lands
 * in another piece, and BPE merges across it differ.
 */
export const GPT2_SPLIT =
  /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+/gu;
