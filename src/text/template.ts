/**
 * Where a tokenizer puts its special tokens, read from tokenizer.json's `post_processor`.
 *
 * We add special tokens ourselves (after truncating the content) instead of letting the library
 * do it, so that truncation keeps the final [SEP] the way HF tokenizers / sentence-transformers
 * do. The template tells us which ids go where and with which token type id, for any model,
 * without hard-coding BERT's.
 */

/** A run of special tokens, each with its token type id. */
export interface SpecialRun {
  readonly ids: readonly number[];
  readonly typeIds: readonly number[];
}

/** The layout of a single sequence (`before A after`) and of a pair (`before A between B after`). */
export interface SpecialTemplate {
  readonly single: { readonly before: SpecialRun; readonly typeA: number; readonly after: SpecialRun };
  readonly pair: {
    readonly before: SpecialRun;
    readonly typeA: number;
    readonly between: SpecialRun;
    readonly typeB: number;
    readonly after: SpecialRun;
  };
}

const EMPTY: SpecialRun = { ids: [], typeIds: [] };

/** No post-processor: no special tokens; the second sequence still gets type id 1, as in HF tokenizers. */
export const NO_SPECIALS: SpecialTemplate = {
  single: { before: EMPTY, typeA: 0, after: EMPTY },
  pair: { before: EMPTY, typeA: 0, between: EMPTY, typeB: 1, after: EMPTY },
};

type Json = Record<string, unknown>;

/** Reads the template of a tokenizer.json `post_processor` (null or absent: no special tokens). */
export function readTemplate(postProcessor: unknown): SpecialTemplate {
  if (postProcessor === null || postProcessor === undefined) return NO_SPECIALS;
  const config = postProcessor as Json;
  switch (config.type) {
    case 'TemplateProcessing':
      return fromTemplateProcessing(config);
    case 'BertProcessing': {
      const cls = idOf(config.cls, 'cls');
      const sep = idOf(config.sep, 'sep');
      return {
        single: { before: run([cls], 0), typeA: 0, after: run([sep], 0) },
        pair: { before: run([cls], 0), typeA: 0, between: run([sep], 0), typeB: 1, after: run([sep], 1) },
      };
    }
    case 'RobertaProcessing': {
      const cls = idOf(config.cls, 'cls');
      const sep = idOf(config.sep, 'sep');
      // RoBERTa has a single token type: HF tokenizers give every position type id 0.
      return {
        single: { before: run([cls], 0), typeA: 0, after: run([sep], 0) },
        pair: { before: run([cls], 0), typeA: 0, between: run([sep, sep], 0), typeB: 0, after: run([sep], 0) },
      };
    }
    case 'ByteLevel':
      // Only adjusts offsets; adds no tokens.
      return NO_SPECIALS;
    case 'Sequence': {
      const processors = Array.isArray(config.processors) ? (config.processors as Json[]) : [];
      const adding = processors.filter((p) => p?.type !== 'ByteLevel');
      if (adding.length === 0) return NO_SPECIALS;
      if (adding.length > 1)
        throw new Error(
          `post_processor: a Sequence with ${adding.length} processors that add special tokens is not supported`,
        );
      return readTemplate(adding[0]);
    }
    default:
      throw new Error(`post_processor: unsupported type ${JSON.stringify(config.type)}`);
  }
}

function fromTemplateProcessing(config: Json): SpecialTemplate {
  const specials = (config.special_tokens ?? {}) as Record<string, { ids?: unknown }>;
  const single = split(config.single, specials, ['A']);
  const pair = split(config.pair, specials, ['A', 'B']);
  return {
    single: { before: single.runs[0]!, typeA: single.types[0]!, after: single.runs[1]! },
    pair: {
      before: pair.runs[0]!,
      typeA: pair.types[0]!,
      between: pair.runs[1]!,
      typeB: pair.types[1]!,
      after: pair.runs[2]!,
    },
  };
}

/**
 * Splits a template (`[{SpecialToken}|{Sequence}]`) into the special runs around its sequences,
 * which must appear exactly in the `expected` order.
 */
function split(
  items: unknown,
  specials: Record<string, { ids?: unknown }>,
  expected: string[],
): { runs: SpecialRun[]; types: number[] } {
  if (!Array.isArray(items)) throw new Error('post_processor: TemplateProcessing without a template');
  const runs: { ids: number[]; typeIds: number[] }[] = [{ ids: [], typeIds: [] }];
  const types: number[] = [];
  for (const item of items as Json[]) {
    const special = item.SpecialToken as { id: string; type_id?: number } | undefined;
    const sequence = item.Sequence as { id: string; type_id?: number } | undefined;
    if (special) {
      const ids = specials[special.id]?.ids;
      if (!Array.isArray(ids) || !ids.every(Number.isInteger))
        throw new Error(`post_processor: no ids for special token ${JSON.stringify(special.id)}`);
      const current = runs[runs.length - 1]!;
      for (const id of ids as number[]) {
        current.ids.push(id);
        current.typeIds.push(special.type_id ?? 0);
      }
    } else if (sequence) {
      if (sequence.id !== expected[types.length])
        throw new Error(`post_processor: unsupported template order (sequence ${sequence.id})`);
      types.push(sequence.type_id ?? 0);
      runs.push({ ids: [], typeIds: [] });
    } else {
      throw new Error(`post_processor: unknown template item ${JSON.stringify(item)}`);
    }
  }
  if (types.length !== expected.length)
    throw new Error(`post_processor: template must contain ${expected.map((s) => '$' + s).join(' and ')}`);
  return { runs, types };
}

/** `["[CLS]", 101]` -> 101 */
function idOf(value: unknown, name: string): number {
  const id: unknown = Array.isArray(value) ? value[1] : undefined;
  if (!Number.isInteger(id)) throw new Error(`post_processor: invalid ${name} token ${JSON.stringify(value)}`);
  return id as number;
}

function run(ids: number[], typeId: number): SpecialRun {
  return { ids, typeIds: ids.map(() => typeId) };
}

/** Number of special tokens in a run list. */
export function countSpecials(...runs: SpecialRun[]): number {
  let n = 0;
  for (const r of runs) n += r.ids.length;
  return n;
}
