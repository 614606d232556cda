/**
 * Embedding inputs longer than the model's window: cut (`truncate`), refused (`refuse`: 400
 * input_too_long), or embedded in windows (`chunk`). A chunked input's content tokens are split into
 * contiguous, non-overlapping spans that fill the window less the special tokens and the prompt;
 * each span is fed as an input of its own (the prompt and the special tokens around it), so the
 * windows of one input are batched, cached and counted like any input; their pooled vectors are
 * averaged, weighted by each window's content tokens, before normalisation and dimension cuts.
 */
import { ApiError, invalid } from '../errors.js';
import type { ServedModel } from '../models/registry.js';
import type { Limits } from './context.js';

export type LongInputs = 'truncate' | 'chunk' | 'refuse';
export const longInputsModes: readonly LongInputs[] = ['truncate', 'chunk', 'refuse'];

/** What a request says about long inputs: `longInputs`, else the older `truncate` (false: refuse). */
export interface LongInputsRequest {
  longInputs?: LongInputs;
  truncate?: boolean;
}

/** The server's default: the longInputs setting, else what truncate says (absent in contexts built by hand). */
export function defaultLongInputs(limits: Limits): LongInputs {
  return (limits.longInputs as LongInputs | undefined) ?? (limits.truncate ? 'truncate' : 'refuse');
}

/**
 * The mode a request's inputs are read in. `chunks` is whether the output can be averaged over
 * windows (dense vectors); elsewhere a request asking for `chunk` is refused, naming `output`, and
 * a server default of `chunk` cuts long inputs, or refuses them where truncate is false.
 */
export function longInputsOf(request: LongInputsRequest, limits: Limits, chunks: boolean, output: string): LongInputs {
  if (request.longInputs !== undefined) {
    if (!longInputsModes.includes(request.longInputs))
      throw invalid('long_inputs', `long_inputs must be one of ${longInputsModes.join(', ')}.`);
    if (request.longInputs === 'chunk' && !chunks)
      throw invalid(
        'long_inputs',
        `long_inputs "chunk" averages dense vectors over windows; it does not apply to ${output}. Send truncate or refuse.`,
      );
    return request.longInputs;
  }
  if (request.truncate !== undefined) return request.truncate ? 'truncate' : 'refuse';
  const fallback = defaultLongInputs(limits);
  if (fallback === 'chunk' && !chunks) return limits.truncate ? 'truncate' : 'refuse';
  return fallback;
}

/** Where each window of a chunked input starts and ends in its content tokens. */
export function windowSpans(length: number, room: number): Array<[number, number]> {
  if (!Number.isInteger(room) || room < 1) throw new RangeError(`room must be a positive integer, got ${room}`);
  const spans: Array<[number, number]> = [];
  for (let start = 0; start < length; start += room) spans.push([start, Math.min(start + room, length)]);
  // A blank text has no content tokens: it is fed once, as its prompt and special tokens.
  if (spans.length === 0) spans.push([0, 0]);
  return spans;
}

/** The length of the longest common start of `a` and `b`. */
function commonStart(a: Int32Array, b: Int32Array): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/** An input's windows: the sequences fed (special tokens included) and the content tokens of each. */
export interface Windows {
  sequences: Int32Array[];
  contentTokens: number[];
}

/**
 * The windows of one input, as token ids: `ids` is the prompt's tokens and the text's, tokenised
 * together as for any input; `promptIds` the prompt's alone, of which the tokens `ids` starts with
 * are put before every window (a prompt token that merged with the text's first is content).
 * Token-id inputs have no prompt. An input that fits is one window, exactly as it would be fed whole.
 */
export function chunkWindows(
  model: ServedModel,
  ids: Int32Array,
  promptIds: Int32Array,
  maxInputTokens: number,
  param: string,
): Windows {
  const { tokenizer, maxTokens } = model;
  const total = ids.length + tokenizer.singleSpecials;
  if (total > maxInputTokens) {
    throw new ApiError(
      'input_too_long',
      `${param} has ${total} tokens; at most ${maxInputTokens} are embedded in windows (ONNX_GATEWAY_MAX_INPUT_TOKENS).`,
      { param },
    );
  }
  const prompt = commonStart(ids, promptIds);
  const room = maxTokens - tokenizer.singleSpecials - prompt;
  if (room < 1) {
    throw invalid(
      param,
      `The prompt of "${model.id}" takes ${prompt} of its ${maxTokens} tokens: no room is left for windows of ${param}.`,
    );
  }
  const content = ids.subarray(prompt);
  if (content.length <= room) return { sequences: [tokenizer.single(ids, maxTokens)], contentTokens: [content.length] };
  const sequences: Int32Array[] = [];
  const contentTokens: number[] = [];
  const window = new Int32Array(prompt + room);
  window.set(ids.subarray(0, prompt));
  for (const [start, end] of windowSpans(content.length, room)) {
    window.set(content.subarray(start, end), prompt);
    sequences.push(tokenizer.single(window.subarray(0, prompt + end - start), maxTokens));
    contentTokens.push(end - start);
  }
  return { sequences, contentTokens };
}

/**
 * One row per input from the rows of its windows (`rows` holds every window's row in order): a
 * lone window's row as it is, several windows' rows averaged, weighted by their content tokens
 * (summed in float64).
 */
export function averageWindows(rows: Float32Array, width: number, windows: readonly number[][]): Float32Array {
  const out = new Float32Array(windows.length * width);
  const sum = new Float64Array(width);
  let row = 0;
  windows.forEach((weights, i) => {
    if (weights.length === 1) {
      out.set(rows.subarray(row * width, (row + 1) * width), i * width);
      row += 1;
      return;
    }
    sum.fill(0);
    let total = 0;
    for (const weight of weights) {
      const at = row * width;
      for (let d = 0; d < width; d++) sum[d]! += weight * rows[at + d]!;
      total += weight;
      row += 1;
    }
    for (let d = 0; d < width; d++) out[i * width + d] = sum[d]! / total;
  });
  if (row * width !== rows.length) throw new RangeError(`${rows.length / width} rows given for ${row} windows`);
  return out;
}
