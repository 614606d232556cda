/**
 * How a moderation classifier's scores become OpenAI's verdict (core/moderation.ts), on a served
 * model whose logits the test chooses: labels mapped to categories, labels under their own names,
 * a no-harm label left out, several labels on one category, the threshold, and which model a
 * request's name picks. The tiny reranker's folder lends the tokenizer; no model runs.
 */
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import type { CoreContext } from '../../src/core/context.js';
import { moderate } from '../../src/core/moderation.js';
import type { EngineInput } from '../../src/engine/scheduler.js';
import { moderationCategories, type ModerationTable } from '../../src/models/catalogue.js';
import { Registry, type ServedModel } from '../../src/models/registry.js';
import { TextTokenizer } from '../../src/text/tokenizer.js';

const labels = ['S', 'H', 'HR', 'insult', 'spam', 'OK'];
const table: ModerationTable = {
  categories: { S: 'sexual', H: 'hate', HR: 'harassment', insult: 'harassment', OK: null },
  threshold: 0.6,
};
const logit = (p: number) => Math.log(p / (1 - p));

/** A registry of two classifiers, `mod` with `moderation` (null: none) and `plain` without, whose logits are `rows` (as probabilities). */
async function context(rows: number[][], moderation: ModerationTable | null = table): Promise<CoreContext> {
  const tokenizer = await TextTokenizer.fromDirectory(join(inject('tinyModelsDir'), 'tiny-reranker'));
  const model = {
    id: 'mod',
    task: 'classify',
    aliases: [],
    labels,
    activation: 'sigmoid',
    moderation: moderation ?? undefined,
    tokenizer,
    maxTokens: 64,
  } as unknown as ServedModel;
  const other = {
    id: 'plain',
    task: 'classify',
    aliases: [],
    labels,
    activation: 'sigmoid',
    tokenizer,
    maxTokens: 64,
  } as unknown as ServedModel;
  return {
    registry: new Registry([other, model]),
    limits: { maxInputs: 16, maxInputChars: 1000, truncate: true, rerankMaxChunks: 1, rerankChunkOverlap: 0 },
    scheduler: {
      submit: (_model: string, inputs: EngineInput[]) =>
        Promise.resolve({
          output: Float32Array.from(inputs.flatMap((_, i) => rows[i]!.map(logit))),
          width: labels.length,
          queueMs: 0,
          loadMs: 0,
          inferenceMs: 0,
          batches: 1,
        }),
    },
  };
}

describe('moderation verdicts from a classifier', () => {
  it('maps labels to categories, keeps unmapped labels under their names, leaves the no-harm label out', async () => {
    const ctx = await context([[0.7, 0.1, 0.3, 0.65, 0.2, 0.9]]);
    const { results, model } = await moderate(ctx, { inputs: ['a text'] });
    expect(model).toBe('mod');
    const [verdict] = results;
    // Every OpenAI category, in OpenAI's order, then the label without a category.
    expect(Object.keys(verdict!.categoryScores)).toEqual([...moderationCategories, 'spam']);
    expect(verdict!.judged.sort()).toEqual(['harassment', 'hate', 'sexual', 'spam']);
    expect(verdict!.categoryScores.sexual).toBeCloseTo(0.7, 6);
    // HR (0.3) and insult (0.65) both map to harassment: the higher speaks for it.
    expect(verdict!.categoryScores.harassment).toBeCloseTo(0.65, 6);
    expect(verdict!.categoryScores.spam).toBeCloseTo(0.2, 6);
    // OK scored 0.9 but is no harm: it neither appears nor flags.
    expect(
      Object.entries(verdict!.categories)
        .filter(([, flagged]) => flagged)
        .map(([key]) => key)
        .sort(),
    ).toEqual(['harassment', 'sexual']);
    expect(verdict!.categories.hate).toBe(false);
    expect(verdict!.flagged).toBe(true);
  });

  it('answers the categories the model does not judge as false with score 0, outside `judged`', async () => {
    const ctx = await context([[0.1, 0.1, 0.1, 0.1, 0.1, 0.1]]);
    const [verdict] = (await moderate(ctx, { inputs: ['a text'] })).results;
    for (const category of [
      'illicit',
      'illicit/violent',
      'self-harm',
      'self-harm/intent',
      'self-harm/instructions',
      'violence',
      'violence/graphic',
      'sexual/minors',
    ]) {
      expect(verdict!.categories[category], category).toBe(false);
      expect(verdict!.categoryScores[category], category).toBe(0);
      expect(verdict!.judged).not.toContain(category);
    }
  });

  it('flags at the threshold, not below it', async () => {
    const ctx = await context([
      [0.59, 0.1, 0.1, 0.1, 0.59, 0.99],
      [0.1, 0.6, 0.1, 0.1, 0.1, 0.1],
    ]);
    const { results } = await moderate(ctx, { inputs: ['below', 'at'] });
    expect(results.map((r) => r.flagged)).toEqual([false, true]);
    expect(results[1]!.categories.hate).toBe(true);
  });

  it("takes OpenAI's model names as the served moderation model, and refuses a classifier without a table", async () => {
    const ctx = await context([[0.1, 0.1, 0.1, 0.1, 0.1, 0.1]]);
    for (const name of ['omni-moderation-latest', 'text-moderation-stable', undefined])
      expect((await moderate(ctx, { model: name, inputs: ['x'] })).model).toBe('mod');
    await expect(moderate(ctx, { model: 'plain', inputs: ['x'] })).rejects.toMatchObject({
      code: 'invalid_request',
      param: 'model',
    });
    const none = await context([[0.1, 0.1, 0.1, 0.1, 0.1, 0.1]], null);
    await expect(moderate(none, { inputs: ['x'] })).rejects.toMatchObject({ code: 'unsupported_operation' });
  });
});
