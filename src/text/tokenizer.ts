/**
 * Text to token ids for one model: content ids from @huggingface/tokenizers, special tokens and
 * truncation done here, the way HF tokenizers / sentence-transformers do them (the final [SEP] is
 * kept; pairs use `longest_first`). The library's own truncation cuts the finished sequence and so
 * drops the final [SEP], which changes the model's output.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type ContentEncoder, contentEncoder } from './content-encoder.js';
import { loadLibraryTokenizer, type LibraryTokenizer } from './library-patches.js';
import { countSpecials, readTemplate, type SpecialRun, type SpecialTemplate } from './template.js';
import { longestFirst } from './truncation.js';

export type { SpecialRun, SpecialTemplate } from './template.js';

/** Shared so that the hot path allocates no options object. */
const CONTENT_ONLY = Object.freeze({ add_special_tokens: false });

export class TextTokenizer {
  /** How many special tokens a single sequence adds (2 for BERT). */
  readonly singleSpecials: number;
  /** How many special tokens a pair adds (3 for BERT, 4 for RoBERTa). */
  readonly pairSpecials: number;
  readonly padId: number;
  readonly template: SpecialTemplate;

  private readonly tokenizer: LibraryTokenizer;
  /** The library's stages without its glue, with a word cache; undefined where only the library's path is exact. */
  private readonly fast: ContentEncoder | undefined;
  // The template's runs as typed arrays, ready to copy.
  private readonly singleBefore: Int32Array;
  private readonly singleAfter: Int32Array;
  private readonly pairRuns: readonly [Run, Run, Run];

  private constructor(tokenizer: LibraryTokenizer, template: SpecialTemplate, padId: number) {
    this.tokenizer = tokenizer;
    this.fast = contentEncoder(tokenizer);
    this.template = template;
    this.padId = padId;
    const { single, pair } = template;
    this.singleSpecials = countSpecials(single.before, single.after);
    this.pairSpecials = countSpecials(pair.before, pair.between, pair.after);
    this.singleBefore = Int32Array.from(single.before.ids);
    this.singleAfter = Int32Array.from(single.after.ids);
    this.pairRuns = [toRun(pair.before), toRun(pair.between), toRun(pair.after)];
  }

  /** Loads `tokenizer.json` and, if present, `tokenizer_config.json` from a model folder. */
  static async fromDirectory(dir: string): Promise<TextTokenizer> {
    const tokenizerJson = JSON.parse(await readFile(join(dir, 'tokenizer.json'), 'utf8')) as object;
    let tokenizerConfig: object | undefined;
    try {
      tokenizerConfig = JSON.parse(await readFile(join(dir, 'tokenizer_config.json'), 'utf8')) as object;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    return TextTokenizer.fromJson(tokenizerJson, tokenizerConfig);
  }

  static fromJson(tokenizerJson: object, tokenizerConfig: object = {}): TextTokenizer {
    // The library insists on these keys being present, even when null.
    const json: Record<string, unknown> = {
      normalizer: null,
      pre_tokenizer: null,
      post_processor: null,
      decoder: null,
      added_tokens: [],
      ...tokenizerJson,
    };
    // The library's tokenizer with its parts made exact or faster (library-patches.ts).
    const { tokenizer } = loadLibraryTokenizer(json, tokenizerConfig);
    return new TextTokenizer(
      tokenizer,
      readTemplate(json.post_processor),
      padIdOf(json, tokenizerConfig as Record<string, unknown>, tokenizer),
    );
  }

  /** Content token ids of a text: no special tokens, never truncated. Blank text gives none. */
  /** Whether `encode` takes the fast path (the library's stages without its glue, with a word cache). */
  get fastPath(): boolean {
    return this.fast !== undefined;
  }

  encode(text: string): Int32Array {
    return this.fast?.(text) ?? this.libraryEncode(text);
  }

  /** The library's own `encode`: the reference the fast path is tested against. */
  libraryEncode(text: string): Int32Array {
    return new Int32Array(this.tokenizer.encode(text, CONTENT_ONLY).ids);
  }

  decode(ids: ArrayLike<number>, skipSpecialTokens = false): string {
    // The library rejects an empty list.
    if (ids.length === 0) return '';
    return this.tokenizer.decode(Array.from(ids), { skip_special_tokens: skipSpecialTokens });
  }

  /** The id of a token of the vocabulary (or an added token), by its text. */
  idOf(token: string): number | undefined {
    return this.tokenizer.token_to_id(token) ?? undefined;
  }

  /** The ids the template adds around a single sequence ([CLS], [SEP]; <s>, </s>). */
  get singleSpecialIds(): number[] {
    return [...this.singleBefore, ...this.singleAfter];
  }

  /** How many special tokens come before a single sequence's content (1 for BERT's [CLS]). */
  get singleLeading(): number {
    return this.singleBefore.length;
  }

  /** One sequence with its special tokens, content cut so that the total is at most `maxTokens`. */
  single(content: Int32Array, maxTokens: number): Int32Array {
    const kept = Math.min(content.length, this.room(maxTokens, this.singleSpecials));
    const before = this.singleBefore;
    const out = new Int32Array(this.singleSpecials + kept);
    out.set(before);
    out.set(content.subarray(0, kept), before.length);
    out.set(this.singleAfter, before.length + kept);
    return out;
  }

  /** A pair with special tokens and token type ids, cut to at most `maxTokens` by `longest_first`. */
  pair(a: Int32Array, b: Int32Array, maxTokens: number): { ids: Int32Array; typeIds: Uint8Array } {
    const [keptA, keptB] = longestFirst(a.length, b.length, this.room(maxTokens, this.pairSpecials));
    const { typeA, typeB } = this.template.pair;
    const [before, between, after] = this.pairRuns;
    const length = this.pairSpecials + keptA + keptB;
    const ids = new Int32Array(length);
    const typeIds = new Uint8Array(length);
    let at = put(ids, typeIds, 0, before.ids, before.typeIds);
    ids.set(a.subarray(0, keptA), at);
    typeIds.fill(typeA, at, (at += keptA));
    at = put(ids, typeIds, at, between.ids, between.typeIds);
    ids.set(b.subarray(0, keptB), at);
    typeIds.fill(typeB, at, (at += keptB));
    put(ids, typeIds, at, after.ids, after.typeIds);
    return { ids, typeIds };
  }

  private room(maxTokens: number, specials: number): number {
    if (!Number.isInteger(maxTokens) || maxTokens < specials) {
      throw new RangeError(
        `maxTokens must be an integer of at least ${specials} (the special tokens), got ${maxTokens}`,
      );
    }
    return maxTokens - specials;
  }
}

interface Run {
  ids: Int32Array;
  typeIds: Uint8Array;
}

function toRun(run: SpecialRun): Run {
  return { ids: Int32Array.from(run.ids), typeIds: Uint8Array.from(run.typeIds) };
}

function put(ids: Int32Array, typeIds: Uint8Array, at: number, runIds: Int32Array, runTypes: Uint8Array): number {
  ids.set(runIds, at);
  typeIds.set(runTypes, at);
  return at + runIds.length;
}

/**
 * The padding id: tokenizer.json's padding settings, else the config's pad token, else 0.
 * Padded positions are masked out, so the value only has to be a valid id.
 */
function padIdOf(json: Record<string, unknown>, config: Record<string, unknown>, tokenizer: LibraryTokenizer): number {
  const padding = json.padding as { pad_id?: unknown } | null | undefined;
  if (Number.isInteger(padding?.pad_id)) return padding!.pad_id as number;
  // pad_token is a string, or an AddedToken object in older configs.
  const pad = config.pad_token as string | { content?: string } | null | undefined;
  const content = typeof pad === 'string' ? pad : pad?.content;
  const id = content === undefined ? undefined : tokenizer.token_to_id(content);
  return id ?? 0;
}
