/**
 * The check of a batch's input file before anything runs, as OpenAI's: every line a JSON object
 * with a `custom_id` of its own, the method POST, the batch's endpoint as its `url` and an object
 * as its `body`, and no more lines than the limit. Any line that fails fails the whole batch, and
 * the batch's `errors` name each such line. What the endpoint thinks of a body is not checked
 * here: a request that fails when it runs goes to the error file and the batch completes.
 */
import { readLines } from './jsonl.js';
import type { BatchLineError } from './types.js';

/** Errors kept on a failed batch; a file with more stops being read there. */
const maxListedErrors = 1000;

export interface ValidationResult {
  /** Requests in the file. */
  total: number;
  errors: BatchLineError[];
}

/** One request line of an input file, as the run reads it. */
export interface RequestLine {
  custom_id: string;
  method: string;
  url: string;
  body: Record<string, unknown>;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The line's problem, or undefined when it is a request the batch can run. */
export function lineError(text: string, endpoint: string): Omit<BatchLineError, 'line'> | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { code: 'invalid_json_line', message: `This line is not JSON: ${(error as Error).message}`, param: null };
  }
  if (!isObject(value)) return { code: 'invalid_request', message: 'Each line must be a JSON object.', param: null };
  if (typeof value.custom_id !== 'string' || value.custom_id === '')
    return { code: 'missing_required_parameter', message: 'custom_id must be a non-empty string.', param: 'custom_id' };
  if (value.method !== 'POST')
    return {
      code: 'invalid_method',
      message: `method must be "POST"; got ${JSON.stringify(value.method ?? null)}.`,
      param: 'method',
    };
  if (value.url !== endpoint)
    return {
      code: 'mismatched_endpoint',
      message: `url must be the batch's endpoint "${endpoint}"; got ${JSON.stringify(value.url ?? null)}.`,
      param: 'url',
    };
  if (!isObject(value.body)) return { code: 'invalid_request', message: 'body must be a JSON object.', param: 'body' };
  return undefined;
}

/** Reads the whole input file once, holding only the custom_ids seen. */
export async function validateInput(path: string, endpoint: string, maxRequests: number): Promise<ValidationResult> {
  const seen = new Set<string>();
  const errors: BatchLineError[] = [];
  let total = 0;
  for await (const line of readLines(path)) {
    total += 1;
    if (total > maxRequests) {
      errors.push({
        code: 'too_many_requests',
        message: `The input file has more than ${maxRequests} requests, the most a batch may have (batchMaxRequests).`,
        param: null,
        line: line.number,
      });
      break;
    }
    const problem = lineError(line.text, endpoint);
    if (problem) errors.push({ ...problem, line: line.number });
    else {
      const id = (JSON.parse(line.text) as RequestLine).custom_id;
      if (seen.has(id))
        errors.push({
          code: 'duplicate_custom_id',
          message: `The custom_id "${id}" is used by an earlier line; each request needs its own.`,
          param: 'custom_id',
          line: line.number,
        });
      seen.add(id);
    }
    if (errors.length >= maxListedErrors) break;
  }
  if (total === 0)
    errors.push({ code: 'empty_file', message: 'The input file has no requests.', param: null, line: null });
  return { total, errors };
}
