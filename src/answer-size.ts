/**
 * Answers whose size grows with the request (token vectors, sparse vectors, tokens, edited images)
 * are bounded before any work runs: each input's largest share of the answer text is counted from
 * the request's shape (its tokens, the model's width, the image sizes), and a request whose total
 * could pass the caller's limit is refused with `response_too_large`, saying how to split it.
 */
import { ApiError } from './errors.js';
import { MAX_NUMBER_BYTES } from './vectors/encoding.js';

/** Most bytes of one float in an answer, its comma included. */
export const NUMBER_BYTES = MAX_NUMBER_BYTES;
/** Most bytes of one sparse weight: TEI's `{"index":250001,"value":<number>},`, longer than OpenAI's form. */
export const SPARSE_ENTRY_BYTES = 25 + NUMBER_BYTES;
/** Most bytes of one token of a tokenize answer, its text aside: `{"id":..,"text":"","special":false,"start":..,"stop":..},`. */
export const TOKEN_ENTRY_BYTES = 80;
/** Most bytes of a UTF-16 code unit inside a JSON string (`\u001f`). */
export const STRING_UNIT_BYTES = 6;

export interface AnswerShape {
  /** What the answer holds, for the message ("token vectors"). */
  what: string;
  /** The request's field the inputs are in (`input`, `image`). */
  param: string;
  /** Each input's largest share of the answer, in bytes. */
  perInput: readonly number[];
  /** How the figure comes about, for the message ("2,048 inputs, 524,288 tokens x 384 numbers"). */
  detail: string;
}

const megabytes = (bytes: number) => (bytes / (1024 * 1024)).toFixed(1);

/** Refuses a request whose answer could be over `limit` bytes (absent: no limit). */
export function checkAnswerSize(limit: number | undefined, shape: AnswerShape): void {
  if (limit === undefined) return;
  let total = 0;
  let largest = 0;
  let largestAt = 0;
  shape.perInput.forEach((bytes, i) => {
    total += bytes;
    if (bytes > largest) [largest, largestAt] = [bytes, i];
  });
  if (total <= limit) return;
  const figure = `The answer could be up to ${megabytes(total)} MB of ${shape.what} (${shape.detail}); this server sends at most ${megabytes(limit)} MB (ONNX_GATEWAY_MAX_RESPONSE_MB).`;
  if (largest > limit) {
    const one = `${shape.param}[${largestAt}]`;
    throw new ApiError(
      'response_too_large',
      `${figure} ${one} alone could take ${megabytes(largest)} MB: shorten it.`,
      { param: one },
    );
  }
  const fit = Math.max(1, Math.floor(limit / (total / shape.perInput.length)));
  const parts = Math.ceil(shape.perInput.length / fit);
  throw new ApiError(
    'response_too_large',
    `${figure} Split the request: about ${fit} of these inputs fit in one (${parts} or more requests).`,
    { param: shape.param },
  );
}

export const thousands = (n: number) => n.toLocaleString('en-US');
