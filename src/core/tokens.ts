/**
 * The tokens a served model sees: texts to tokens (with where each came from in the text), and
 * token ids back to text.
 */
import { ApiError, invalid } from '../errors.js';
import type { ServedModel } from '../models/registry.js';
import { alignTokens } from '../text/alignment.js';
import { checkAnswerSize, thousands, STRING_UNIT_BYTES, TOKEN_ENTRY_BYTES } from '../answer-size.js';
import type { CoreContext } from './context.js';
import { promptFor } from './prompts.js';
import { mapInSlices } from './map-in-slices.js';

export interface TokenizeRequest {
  /** Absent: the first served model. */
  model?: string;
  inputs: string[];
  /** Add the model's special tokens around each input (default true). */
  addSpecialTokens?: boolean;
  /** Prepend the model's query or document prefix, as embeddings do. */
  inputType?: string;
  /** Most bytes of the answer text the caller sends: a request that could need more is refused before its tokens are made. */
  answerLimit?: number;
}

export interface TextToken {
  id: number;
  /** The token's span of the input, or the token string itself for special and unplaced tokens. */
  text: string;
  /** Added by the model's template ([CLS], [SEP]). */
  special: boolean;
  /** Code point offsets into the input (prefix included); null for special and unplaced tokens. */
  start: number | null;
  stop: number | null;
}

export interface TokenizeResult {
  model: string;
  tokens: TextToken[][];
}

export interface DecodeRequest {
  model?: string;
  ids: number[][];
  /** Leave out the model's special tokens (default true). */
  skipSpecialTokens?: boolean;
}

export interface DecodeResult {
  model: string;
  texts: string[];
}

function findModel(ctx: CoreContext, name: string | undefined): ServedModel {
  const served = ctx.registry.list();
  const model = name === undefined || name === '' ? served[0] : served.find((m) => m.id === name);
  if (!model) {
    throw new ApiError(
      'model_not_found',
      `The model "${name}" is not served here. Served models: ${served.map((m) => m.id).join(', ') || 'none'}.`,
      { param: 'model' },
    );
  }
  return model;
}

function checkCount(param: string, count: number, ctx: CoreContext): void {
  if (count === 0) throw invalid(param, `${param} must not be empty.`);
  if (count > ctx.limits.maxInputs)
    throw invalid(param, `${param} has ${count} items; at most ${ctx.limits.maxInputs} are accepted per request.`);
}

export async function tokenize(
  ctx: CoreContext,
  request: TokenizeRequest,
  signal?: AbortSignal,
): Promise<TokenizeResult> {
  const model = findModel(ctx, request.model);
  const { tokenizer } = model;
  checkCount('inputs', request.inputs.length, ctx);
  request.inputs.forEach((text, i) => {
    if (text.length > ctx.limits.maxInputChars)
      throw invalid(
        `inputs[${i}]`,
        `inputs[${i}] has ${text.length} characters; at most ${ctx.limits.maxInputChars} are accepted.`,
      );
  });
  const prefix = promptFor(model, request.inputType);
  const special = (id: number): TextToken => ({
    id,
    text: tokenizer.decode([id]),
    special: true,
    start: null,
    stop: null,
  });
  const before = request.addSpecialTokens === false ? [] : tokenizer.template.single.before.ids.map(special);
  const after = request.addSpecialTokens === false ? [] : tokenizer.template.single.after.ids.map(special);

  // Each token's own text, decoded once per request: texts repeat their tokens.
  const pieceOf = new Map<number, string>();
  const piece = (id: number) => {
    let text = pieceOf.get(id);
    if (text === undefined) pieceOf.set(id, (text = tokenizer.decode([id])));
    return text;
  };
  const ids = await mapInSlices(request.inputs, (input) => tokenizer.encode(prefix + input), signal);
  if (request.answerLimit !== undefined) {
    // A token's text is its span of the input or, unplaced, its own piece: the input and the pieces bound them.
    const specials = [...before, ...after];
    const specialBytes = specials.reduce(
      (sum, token) => sum + TOKEN_ENTRY_BYTES + STRING_UNIT_BYTES * token.text.length,
      0,
    );
    const perInput = ids.map((sequence, i) => {
      let units = prefix.length + request.inputs[i]!.length;
      for (const id of sequence) units += piece(id).length;
      return sequence.length * TOKEN_ENTRY_BYTES + units * STRING_UNIT_BYTES + specialBytes + 2;
    });
    const total = ids.reduce((sum, sequence) => sum + sequence.length + specials.length, 0);
    checkAnswerSize(request.answerLimit, {
      what: 'tokens',
      param: 'inputs',
      perInput,
      detail: `${thousands(ids.length)} inputs, ${thousands(total)} tokens`,
    });
  }
  const tokens = await mapInSlices(
    request.inputs,
    (input, i) => {
      const text = prefix + input;
      const sequence = ids[i]!;
      const pieces = Array.from(sequence, piece);
      const spans = alignTokens(text, pieces);
      const chars = Array.from(text);
      const content = pieces.map((own, t): TextToken => {
        const span = spans[t];
        if (!span) return { id: sequence[t]!, text: own, special: false, start: null, stop: null };
        return {
          id: sequence[t]!,
          text: chars.slice(span.start, span.stop).join(''),
          special: false,
          start: span.start,
          stop: span.stop,
        };
      });
      return [...before, ...content, ...after];
    },
    signal,
  );
  return { model: model.id, tokens };
}

export function decode(ctx: CoreContext, request: DecodeRequest): DecodeResult {
  const model = findModel(ctx, request.model);
  checkCount('ids', request.ids.length, ctx);
  const texts = request.ids.map((ids, i) => {
    for (const id of ids) {
      if (!Number.isInteger(id) || id < 0 || (model.vocabSize > 0 && id >= model.vocabSize)) {
        throw invalid(
          `ids[${i}]`,
          `token ids must be integers in [0, ${model.vocabSize - 1}] for "${model.id}"; got ${id}.`,
        );
      }
    }
    return model.tokenizer.decode(ids, request.skipSpecialTokens ?? true);
  });
  return { model: model.id, texts };
}
