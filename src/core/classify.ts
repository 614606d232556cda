/**
 * The classify operation: texts, or (text, text pair) pairs, in; one score per label out, for a
 * sequence-classification model. The logits come from the same worker path as rerank's; how they
 * become scores is the model's (`problem_type`, see models/facts.ts): a softmax over the labels, a
 * sigmoid per label (multi-label), or the logits as they are (regression).
 */
import { randomUUID } from 'node:crypto';
import { ApiError, invalid } from '../errors.js';
import type { ClassifyActivation } from '../models/facts.js';
import type { ServedModel } from '../models/registry.js';
import { operationSpan, recordSpan, tokenizeAttributes, tracer } from '../tracing/spans.js';
import { sigmoid } from '../vectors/scores.js';
import type { CoreContext, Timings } from './context.js';
import { fit } from './embeddings.js';
import { mapInSlices } from './map-in-slices.js';

/** A text, or a text and its pair (premise and hypothesis, question and answer). */
export type ClassifyInput = string | readonly [string, string];

export interface ClassifyRequest {
  model?: string;
  inputs: ClassifyInput[];
  /** Overrides the server's truncation setting for this request. */
  truncate?: boolean;
  /** Which end of a too-long single text is cut (pairs are cut longest first, as HF tokenizers do). */
  truncationDirection?: 'left' | 'right';
  /** The request's name for the inputs in error messages (`input`, `inputs`). */
  param?: string;
}

export interface ClassifyResult {
  id: string;
  model: string;
  /** Label names in logit order. */
  labels: string[];
  /** rows x labels, row-major: the activated scores. */
  scores: Float32Array;
  /** rows x labels: the head's logits. */
  logits: Float32Array;
  count: number;
  activation: ClassifyActivation;
  /** Tokens fed to the model, special tokens included. */
  promptTokens: number;
  timings: Timings;
}

/** Scores of one row of logits, in place into `out`. */
export function activate(activation: ClassifyActivation, logits: Float32Array, out: Float32Array): void {
  if (activation === 'none') {
    out.set(logits);
  } else if (activation === 'sigmoid') {
    for (let i = 0; i < logits.length; i++) out[i] = sigmoid(logits[i]!);
  } else {
    let max = -Infinity;
    for (const value of logits) max = Math.max(max, value);
    let sum = 0;
    for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i]! - max);
    for (let i = 0; i < logits.length; i++) out[i] = Math.exp(logits[i]! - max) / sum;
  }
}

export async function classify(
  ctx: CoreContext,
  request: ClassifyRequest,
  signal?: AbortSignal,
): Promise<ClassifyResult> {
  const model = ctx.registry.resolve(request.model, 'classify');
  return classifyWith(ctx, model, request, signal);
}

/** Classifies with a model already resolved (moderations pick theirs by their own rules). */
export function classifyWith(
  ctx: CoreContext,
  model: ServedModel,
  request: ClassifyRequest,
  signal?: AbortSignal,
): Promise<ClassifyResult> {
  return tracer
    ? operationSpan(tracer, 'classify', model.id, () => classifyUntraced(ctx, model, request, signal), classifyOutcome)
    : classifyUntraced(ctx, model, request, signal);
}

const classifyOutcome = (result: ClassifyResult) => ({ model: result.model, inputTokens: result.promptTokens });

async function classifyUntraced(
  ctx: CoreContext,
  model: ServedModel,
  request: ClassifyRequest,
  signal?: AbortSignal,
): Promise<ClassifyResult> {
  const param = request.param ?? 'input';
  const { inputs } = request;
  if (inputs.length === 0) throw invalid(param, `${param} must not be empty.`);
  if (inputs.length > ctx.limits.maxInputs)
    throw invalid(
      param,
      `${param} has ${inputs.length} items; at most ${ctx.limits.maxInputs} are accepted per request.`,
    );
  const truncate = request.truncate ?? ctx.limits.truncate;
  const direction = request.truncationDirection ?? 'right';
  const check = (text: string, at: string) => {
    if (text.length === 0) throw invalid(at, `${at} must not be an empty string.`);
    if (text.length > ctx.limits.maxInputChars)
      throw invalid(at, `${at} has ${text.length} characters; at most ${ctx.limits.maxInputChars} are accepted.`);
  };
  inputs.forEach((input, i) => {
    if (typeof input === 'string') check(input, `${param}[${i}]`);
    else input.forEach((text, j) => check(text, `${param}[${i}][${j}]`));
  });

  const started = performance.now();
  const tokenizer = model.tokenizer;
  // Every row carries its token types, so single texts and pairs of concurrent requests can share a batch.
  const sequences = await mapInSlices(
    inputs,
    (input, i) => {
      if (typeof input === 'string') {
        const ids = fit(model, tokenizer.encode(input), truncate, direction, `${param}[${i}]`);
        return { ids, typeIds: new Uint8Array(ids.length) };
      }
      const [a, b] = [tokenizer.encode(input[0]), tokenizer.encode(input[1])];
      const length = a.length + b.length + tokenizer.pairSpecials;
      if (length > model.maxTokens && !truncate) {
        throw new ApiError(
          'input_too_long',
          `${param}[${i}] has ${length} tokens; "${model.id}" takes at most ${model.maxTokens}.`,
          { param: `${param}[${i}]` },
        );
      }
      return tokenizer.pair(a, b, model.maxTokens);
    },
    signal,
  );
  const tokenized = performance.now();
  let promptTokens = 0;
  for (const sequence of sequences) promptTokens += sequence.ids.length;
  if (tracer) recordSpan(tracer, 'tokenize', started, tokenized, tokenizeAttributes(sequences.length, promptTokens));
  const tokenizeMs = tokenized - started;

  const job = await ctx.scheduler.submit(model.id, sequences, signal);
  const width = model.labels.length;
  if (job.width !== width)
    throw new ApiError(
      'internal',
      `"${model.id}" gave ${job.width} logits per input; its config.json names ${width} labels.`,
      { permanent: true },
    );
  const scores = new Float32Array(job.output.length);
  for (let row = 0; row < inputs.length; row++) {
    activate(
      model.activation,
      job.output.subarray(row * width, (row + 1) * width),
      scores.subarray(row * width, (row + 1) * width),
    );
  }
  return {
    id: randomUUID(),
    model: model.id,
    labels: model.labels,
    scores,
    logits: job.output,
    count: inputs.length,
    activation: model.activation,
    promptTokens,
    timings: { tokenizeMs, queueMs: job.queueMs, loadMs: job.loadMs, inferenceMs: job.inferenceMs },
  };
}
