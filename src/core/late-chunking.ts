/**
 * Late chunking (Jina's name): a request's texts are read as one document. Each is tokenised alone,
 * without special tokens; they are put in one sequence (the prompt first, if any, and the model's
 * special tokens around it) that runs once, so each text's tokens attend the others'; each text's
 * vector is the mean of the token vectors over its own tokens, then normalised and cut as any
 * vector is. So it is defined only for mean-pooling models whose graph gives token vectors, and the
 * texts together must fit the window. The vectors depend on the whole request, so none is cached.
 */
import { ApiError, invalid } from '../errors.js';
import type { ServedModel } from '../models/registry.js';
import type { CoreContext } from './context.js';
import { checkTexts, checkTokenIds, normaliseInput, type EmbeddedRows, type EmbedRequest } from './embeddings.js';
import { promptFor } from './prompts.js';

/** The vectors of a request's texts, late-chunked: one row per text, before normalisation. */
export async function lateChunk(
  ctx: CoreContext,
  model: ServedModel,
  request: Pick<EmbedRequest, 'input' | 'inputType' | 'longInputs'>,
  signal?: AbortSignal,
): Promise<{ job: EmbeddedRows; count: number; promptTokens: number; tokenizeMs: number }> {
  checkLateChunking(model);
  if (request.longInputs !== undefined && request.longInputs !== 'refuse') {
    throw invalid(
      'long_inputs',
      `late_chunking runs the texts as one sequence, which must fit the window; long_inputs "${request.longInputs}" does not apply.`,
    );
  }
  const started = performance.now();
  const paramOf = (i: number) => `input[${i}]`;
  const { texts, tokens } = normaliseInput(request.input);
  let contents: Int32Array[];
  let prompt: Int32Array = new Int32Array(0);
  if (texts) {
    checkTexts(ctx, texts, paramOf);
    const prefix = promptFor(model, request.inputType);
    if (prefix) prompt = model.tokenizer.encode(prefix);
    contents = texts.map((text) => model.tokenizer.encode(text));
  } else {
    if (tokens!.length > ctx.limits.maxInputs)
      throw invalid(
        'input',
        `input has ${tokens!.length} items; at most ${ctx.limits.maxInputs} are accepted per request.`,
      );
    contents = checkTokenIds(model, tokens!, paramOf);
  }
  contents.forEach((ids, i) => {
    if (ids.length === 0) throw invalid(paramOf(i), `${paramOf(i)} has no tokens: late chunking has none to average.`);
  });

  const { tokenizer, maxTokens } = model;
  const content = prompt.length + contents.reduce((sum, ids) => sum + ids.length, 0);
  const total = content + tokenizer.singleSpecials;
  if (total > maxTokens) {
    throw new ApiError(
      'input_too_long',
      `input has ${total} tokens as one late-chunked sequence (special tokens${prompt.length > 0 ? ' and prompt' : ''} included); "${model.id}" takes at most ${maxTokens}.`,
      { param: 'input' },
    );
  }
  const joined = new Int32Array(content);
  joined.set(prompt);
  // Where each text's tokens start in the sequence fed.
  const starts: number[] = [];
  let at = prompt.length;
  for (const ids of contents) {
    starts.push(tokenizer.singleLeading + at);
    joined.set(ids, at);
    at += ids.length;
  }
  const sequence = tokenizer.single(joined, maxTokens);
  const tokenizeMs = performance.now() - started;

  const job = await ctx.scheduler.submit(model.id, [{ ids: sequence }], signal, 'tokens');
  const width = job.width;
  const output = meanOfSpans(
    job.output,
    width,
    starts.map((start, i) => [start, start + contents[i]!.length]),
  );
  return {
    job: { output, width, queueMs: job.queueMs, loadMs: job.loadMs, inferenceMs: job.inferenceMs },
    count: contents.length,
    promptTokens: Math.max(sequence.length, model.feeds.fixedLength ?? 0),
    tokenizeMs,
  };
}

/** Refuses a model for which late chunking is not its own pooling: it must mean-pool token vectors its graph gives. */
export function checkLateChunking(model: ServedModel): void {
  if (model.images || model.output.pooled) {
    throw invalid(
      'late_chunking',
      `late_chunking averages a model's token vectors; "${model.id}" pools inside its graph (its output "${model.output.name}"), so its token vectors are not what it pools.`,
    );
  }
  if (model.pooling !== 'mean') {
    throw invalid(
      'late_chunking',
      `late_chunking is mean pooling over each text's tokens; "${model.id}" pools by ${model.pooling}.`,
    );
  }
  if (!model.heads.kinds.includes('tokens'))
    throw invalid('late_chunking', `late_chunking needs token vectors, which "${model.id}" does not give.`);
}

/** The mean of the token rows in each span [start, end) of `rows` (tokens x width), summed in float64. */
export function meanOfSpans(rows: Float32Array, width: number, spans: ReadonlyArray<[number, number]>): Float32Array {
  const out = new Float32Array(spans.length * width);
  const sum = new Float64Array(width);
  spans.forEach(([start, end], i) => {
    if (start < 0 || end <= start || end * width > rows.length)
      throw new RangeError(`span [${start}, ${end}) is outside ${rows.length / width} token rows`);
    sum.fill(0);
    for (let t = start; t < end; t++) {
      const at = t * width;
      for (let d = 0; d < width; d++) sum[d]! += rows[at + d]!;
    }
    for (let d = 0; d < width; d++) out[i * width + d] = sum[d]! / (end - start);
  });
  return out;
}
