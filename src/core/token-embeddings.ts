/**
 * Token embeddings: one vector per token of each input (TEI's embed_all). An encoder gives its
 * last hidden state, special tokens included, as they are; a ColBERT model gives its projected,
 * normalised token vectors, encoded as a query (input type `query`) or a document (otherwise),
 * exactly as it reranks (late-interaction.ts).
 */
import { ApiError, invalid } from '../errors.js';
import { checkAnswerSize, thousands, NUMBER_BYTES } from '../answer-size.js';
import type { CoreContext, Timings } from './context.js';
import { encodeInputs, normaliseInput, resolveWithKind, type EmbedRequest } from './embeddings.js';
import { encodeDocument, encodeQuery, tokenVectors } from './late-interaction.js';
import { longInputsOf } from './long-inputs.js';
import { mapInSlices } from './map-in-slices.js';

export interface TokenEmbedRequest extends Pick<
  EmbedRequest,
  'model' | 'input' | 'inputType' | 'truncate' | 'truncationDirection' | 'longInputs'
> {
  /** Most bytes of the answer text the caller sends: a request that could need more is refused before inference. */
  answerLimit?: number;
}

export interface TokenEmbedResult {
  model: string;
  /** Per input, its tokens' vectors (tokens x width, row-major). */
  rows: Float32Array[];
  width: number;
  promptTokens: number;
  timings: Timings;
}

export async function embedTokens(
  ctx: CoreContext,
  request: TokenEmbedRequest,
  signal?: AbortSignal,
): Promise<TokenEmbedResult> {
  const model = resolveWithKind(ctx, request.model, 'tokens');
  const started = performance.now();
  if (model.lateInteraction) {
    const { texts } = normaliseInput(request.input);
    if (!texts)
      throw invalid(
        'input',
        `"${model.id}" is a late-interaction model: its inputs are texts, which it encodes with its query or document marker.`,
      );
    if (texts.length > ctx.limits.maxInputs)
      throw invalid(
        'input',
        `input has ${texts.length} items; at most ${ctx.limits.maxInputs} are accepted per request.`,
      );
    texts.forEach((text, i) => {
      if (text.length === 0) throw invalid(`input[${i}]`, 'input must not contain empty strings.');
      if (text.length > ctx.limits.maxInputChars)
        throw invalid(
          `input[${i}]`,
          `input[${i}] has ${text.length} characters; at most ${ctx.limits.maxInputChars} are accepted.`,
        );
    });
    const side = request.inputType === 'query' ? 'query' : 'document';
    if (request.inputType !== undefined && request.inputType !== 'query' && request.inputType !== 'document') {
      throw invalid('input_type', `"${model.id}" encodes queries or documents; got "${request.inputType}".`);
    }
    const truncate = longInputsOf(request, ctx.limits, false, 'token vectors') === 'truncate';
    const late = model.lateInteraction;
    const limit = Math.min((side === 'query' ? late.queryLength : late.documentLength) - 1, model.maxTokens);
    const inputs = await mapInSlices(
      texts,
      (text, i) => {
        const content = model.tokenizer.encode(text);
        // The marker and the special tokens count; a query's [MASK] padding does not.
        const length = content.length + model.tokenizer.singleSpecials + 1;
        if (!truncate && length > limit + 1) {
          throw new ApiError(
            'input_too_long',
            `input[${i}] has ${length} tokens; "${model.id}" takes at most ${limit + 1} as a ${side}.`,
            { param: `input[${i}]` },
          );
        }
        return side === 'query' ? encodeQuery(model, text) : encodeDocument(model, content)[0]!;
      },
      signal,
    );
    checkTokenAnswer(
      request.answerLimit,
      inputs.map((input) => input.ids.length),
      model.heads.tokens?.width || model.dimensions,
    );
    const tokenizeMs = performance.now() - started;
    const job = await tokenVectors(ctx, model, inputs, side, signal);
    const promptTokens = inputs.reduce((sum, input) => sum + input.ids.length, 0);
    return {
      model: model.id,
      rows: job.rows,
      width: job.width,
      promptTokens,
      timings: { tokenizeMs, queueMs: job.queueMs, loadMs: job.loadMs, inferenceMs: job.inferenceMs },
    };
  }
  const { sequences, promptTokens, tokenizeMs } = await encodeInputs(ctx, model, request, signal, undefined, {
    output: 'token vectors',
  });
  checkTokenAnswer(
    request.answerLimit,
    sequences.map((ids) => ids.length),
    model.heads.tokens?.width || model.dimensions,
  );
  const job = await ctx.scheduler.submit(
    model.id,
    sequences.map((ids) => ({ ids })),
    signal,
    'tokens',
  );
  const rows: Float32Array[] = [];
  let at = 0;
  for (const count of job.counts!) {
    rows.push(job.output.subarray(at * job.width, (at + count) * job.width));
    at += count;
  }
  return {
    model: model.id,
    rows,
    width: job.width,
    promptTokens,
    timings: { tokenizeMs, queueMs: job.queueMs, loadMs: job.loadMs, inferenceMs: job.inferenceMs },
  };
}

/** An answer of token vectors: per input, a list of its tokens' vectors. */
function checkTokenAnswer(limit: number | undefined, lengths: number[], width: number): void {
  if (limit === undefined) return;
  const tokens = lengths.reduce((sum, n) => sum + n, 0);
  checkAnswerSize(limit, {
    what: 'token vectors',
    param: 'input',
    perInput: lengths.map((n) => n * (width * NUMBER_BYTES + 2) + 2),
    detail: `${thousands(lengths.length)} inputs, ${thousands(tokens)} tokens x ${width} numbers`,
  });
}
