/**
 * The tokens a served model sees: texts to tokens (with where each came from in the text), and
 * token ids back to text.
 */
import { ApiError, invalid } from '../errors.js';
import type { ServedModel } from '../models/registry.js';
import { alignTokens } from '../text/alignment.js';
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
    throw new ApiError('model_not_found', `The model "${name}" is not served here. Served models: ${served.map((m) => m.id).join(', ') || 'none'}.`, { param: 'model' });
  }
  return model;
}

function checkCount(param: string, count: number, ctx: CoreContext): void {
  if (count === 0) throw invalid(param, `${param} must not be empty.`);
  if (count > ctx.limits.maxInputs) throw invalid(param, `${param} has ${count} items; at most ${ctx.limits.maxInputs} are accepted per request.`);
}

export async function tokenize(ctx: CoreContext, request: TokenizeRequest, signal?: AbortSignal): Promise<TokenizeResult> {
  const model = findModel(ctx, request.model);
  const { tokenizer } = model;
  checkCount('inputs', request.inputs.length, ctx);
  request.inputs.forEach((text, i) => {
    if (text.length > ctx.limits.maxInputChars) throw invalid(`inputs[${i}]`, `inputs[${i}] has ${text.length} characters; at most ${ctx.limits.maxInputChars} are accepted.`);
  });
  const prefix = promptFor(model, request.inputType);
  const special = (id: number): TextToken => ({ id, text: tokenizer.decode([id]), special: true, start: null, stop: null });
  const before = request.addSpecialTokens === false ? [] : tokenizer.template.single.before.ids.map(special);
  const after = request.addSpecialTokens === false ? [] : tokenizer.template.single.after.ids.map(special);

  // Each token's own text, decoded once per request: texts repeat their tokens.
  const pieceOf = new Map<number, string>();
  const tokens = await mapInSlices(
    request.inputs,
    (input) => {
      const text = prefix + input;
      const ids = tokenizer.encode(text);
      const pieces = Array.from(ids, (id) => {
        let piece = pieceOf.get(id);
        if (piece === undefined) pieceOf.set(id, (piece = tokenizer.decode([id])));
        return piece;
      });
      const spans = alignTokens(text, pieces);
      const chars = Array.from(text);
      const content = pieces.map((piece, i): TextToken => {
        const span = spans[i];
        if (!span) return { id: ids[i]!, text: piece, special: false, start: null, stop: null };
        return { id: ids[i]!, text: chars.slice(span.start, span.stop).join(''), special: false, start: span.start, stop: span.stop };
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
        throw invalid(`ids[${i}]`, `token ids must be integers in [0, ${model.vocabSize - 1}] for "${model.id}"; got ${id}.`);
      }
    }
    return model.tokenizer.decode(ids, request.skipSpecialTokens ?? true);
  });
  return { model: model.id, texts };
}
