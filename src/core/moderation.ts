/**
 * The moderation operation: texts in, OpenAI's moderation verdict out, from a served moderation
 * classifier: a classify model whose manifest has a moderation table (models/catalogue.ts) mapping
 * its labels to OpenAI's categories. Every one of OpenAI's categories is in the verdict, as its
 * clients expect: those the model does not judge are false with score 0, and are not in `judged`.
 * Labels the table leaves out are returned under their own names too; labels mapped to null (a
 * classifier's "OK") are no harm and never flag. An input is flagged when any category scores at
 * or above the table's threshold (default 0.5).
 */
import { ApiError } from '../errors.js';
import { moderationCategories } from '../models/catalogue.js';
import type { ServedModel } from '../models/registry.js';
import { classifyWith } from './classify.js';
import type { CoreContext, Timings } from './context.js';

export const defaultModerationThreshold = 0.5;

const notJudged: Record<string, number> = Object.fromEntries(moderationCategories.map((category) => [category, 0]));

export interface ModerateRequest {
  /** A served moderation classifier, or one of OpenAI's names (omni-moderation-latest, text-moderation-*): the first served one. */
  model?: string;
  inputs: string[];
}

export interface ModerationVerdict {
  flagged: boolean;
  /** Every OpenAI category, then the model's labels that map to none. */
  categories: Record<string, boolean>;
  categoryScores: Record<string, number>;
  /** The keys the model scored (the rest are OpenAI categories it does not judge). */
  judged: string[];
}

export interface ModerateResult {
  model: string;
  results: ModerationVerdict[];
  promptTokens: number;
  timings: Timings;
}

/** OpenAI's own model names ask for whichever moderation model is served. */
const openAiModel = /^(omni-moderation|text-moderation)(-|$)/;

/** The moderation classifier a request names; none served is `unsupported_operation` (the operation is not offered here). */
export function moderationModel(ctx: CoreContext, name: string | undefined): ServedModel {
  if (name === undefined || name === '' || openAiModel.test(name)) {
    const first = ctx.registry.list().find((m) => m.task === 'classify' && m.moderation);
    if (!first) {
      throw new ApiError(
        'unsupported_operation',
        'Moderations need a moderation classifier (a classify model whose manifest maps its labels to moderation categories); none is served here.',
      );
    }
    return first;
  }
  const model = ctx.registry.resolve(name, 'classify');
  if (!model.moderation) {
    throw new ApiError(
      'invalid_request',
      `The model "${model.id}" is a classifier without a moderation table (its manifest's "moderation"), so its labels can not be read as moderation categories; classify with it instead.`,
      { param: 'model' },
    );
  }
  return model;
}

/** Each label's key in the verdict (its category, its own name, or null for no harm). */
function keysOf(model: ServedModel): Array<string | null> {
  const table = model.moderation!.categories;
  return model.labels.map((label) => (Object.hasOwn(table, label) ? table[label]! : label));
}

export async function moderate(
  ctx: CoreContext,
  request: ModerateRequest,
  signal?: AbortSignal,
): Promise<ModerateResult> {
  const model = moderationModel(ctx, request.model);
  const threshold = model.moderation!.threshold ?? defaultModerationThreshold;
  const keys = keysOf(model);
  const result = await classifyWith(ctx, model, { inputs: request.inputs, param: 'input' }, signal);
  const width = result.labels.length;
  const results = request.inputs.map((_, row) => {
    const given: Record<string, number> = {};
    keys.forEach((key, label) => {
      if (key === null) return;
      const score = result.scores[row * width + label]!;
      // Several labels on one category (toxic and insult on harassment): the strongest speaks for it.
      given[key] = Math.max(given[key] ?? -Infinity, score);
    });
    // OpenAI's categories first, in its order: the model's scores, 0 for those it does not judge.
    const categoryScores: Record<string, number> = { ...notJudged, ...given };
    const categories = Object.fromEntries(
      Object.entries(categoryScores).map(([key, score]) => [key, Object.hasOwn(given, key) && score >= threshold]),
    );
    return { flagged: Object.values(categories).some(Boolean), categories, categoryScores, judged: Object.keys(given) };
  });
  return { model: model.id, results, promptTokens: result.promptTokens, timings: result.timings };
}
