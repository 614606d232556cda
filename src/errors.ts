/**
 * The error catalogue: every error the API can answer, by stable code.
 * Codes are public API: add new ones, never rename or repurpose old ones.
 * Every layer throws ApiError with the facts of the failure (code, message, param, how long to wait);
 * only http/ turns it into a response: the catalogue's status, the body, and headers such as Retry-After.
 */
export const catalogue = {
  invalid_json: { status: 400, type: 'invalid_request_error', message: 'The request body is not valid JSON.' },
  invalid_request: { status: 400, type: 'invalid_request_error', message: 'The request is invalid.' },
  invalid_image: { status: 400, type: 'invalid_request_error', message: 'An input image can not be used.' },
  input_too_long: { status: 400, type: 'invalid_request_error', message: 'An input is longer than the model accepts.' },
  unauthorized: {
    status: 401,
    type: 'authentication_error',
    message: 'A valid API key is required: send "Authorization: Bearer <key>".',
  },
  forbidden: { status: 403, type: 'permission_error', message: 'This request is not allowed here.' },
  model_not_found: {
    status: 404,
    type: 'invalid_request_error',
    message: 'The model does not exist or is not served here.',
  },
  route_not_found: { status: 404, type: 'invalid_request_error', message: 'No such route.' },
  not_found: { status: 404, type: 'invalid_request_error', message: 'No such resource.' },
  method_not_allowed: { status: 405, type: 'invalid_request_error', message: 'Method not allowed on this route.' },
  payload_too_large: { status: 413, type: 'invalid_request_error', message: 'The request body is too large.' },
  index_full: {
    status: 413,
    type: 'invalid_request_error',
    message: 'The local index holds as many documents as it may.',
  },
  response_too_large: {
    status: 413,
    type: 'invalid_request_error',
    message: 'The answer would be larger than this server sends: split the request.',
  },
  url_too_long: {
    status: 414,
    type: 'invalid_request_error',
    message: 'A part of the URL is longer than this server reads.',
  },
  unsupported_media_type: {
    status: 415,
    type: 'invalid_request_error',
    message: 'Unsupported content type: send application/json.',
  },
  page_too_complex: {
    status: 422,
    type: 'invalid_request_error',
    message: 'The page is too complex for the web reader to read within its limits.',
  },
  overloaded: {
    status: 429,
    type: 'rate_limit_error',
    message: 'The server is overloaded: retry after the time in Retry-After.',
  },
  client_closed: { status: 499, type: 'invalid_request_error', message: 'The client closed the request.' },
  model_load_failed: { status: 500, type: 'server_error', message: 'The model could not be loaded.', permanent: true },
  internal: { status: 500, type: 'server_error', message: 'Internal error.' },
  unsupported_operation: {
    status: 501,
    type: 'invalid_request_error',
    message: 'This operation is not supported by this server.',
    permanent: true,
  },
  upstream_error: { status: 502, type: 'server_error', message: 'An upstream service failed.' },
  not_ready: { status: 503, type: 'server_error', message: 'The server is starting: models are not warm yet.' },
  insufficient_memory: {
    status: 503,
    type: 'server_error',
    message: 'Loading the model would exceed the memory budget: retry after the time in Retry-After.',
  },
  shutting_down: { status: 503, type: 'server_error', message: 'The server is shutting down.' },
  store_unavailable: { status: 503, type: 'server_error', message: 'The shared task store is not reachable.' },
  timeout: { status: 504, type: 'server_error', message: 'The operation timed out.' },
} as const satisfies Record<string, { status: number; type: string; message: string; permanent?: boolean }>;

export type ErrorCode = keyof typeof catalogue;

export interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: ErrorCode };
}

export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly type: string;
  readonly param: string | null;
  /** How long to wait before the same request may succeed (a full queue, a model that does not fit yet). */
  readonly retryAfterSeconds: number | undefined;
  /**
   * Whether the same request would fail the same way: a server error (5xx) that is permanent tells
   * clients not to retry it (clients such as the OpenAI SDK retry every 5xx otherwise). The
   * catalogue's entry decides, unless the error says otherwise.
   */
  readonly permanent: boolean;

  constructor(
    code: ErrorCode,
    message?: string,
    options: { param?: string | null; retryAfterSeconds?: number; cause?: unknown; permanent?: boolean } = {},
  ) {
    const entry = catalogue[code];
    super(message ?? entry.message, { cause: options.cause });
    this.name = 'ApiError';
    this.code = code;
    this.status = entry.status;
    this.type = entry.type;
    this.param = options.param ?? null;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.permanent = options.permanent ?? ('permanent' in entry && entry.permanent);
  }

  toBody(): ErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/** Shorthand for a 400 that names the offending field. */
export function invalid(param: string, message: string): ApiError {
  return new ApiError('invalid_request', message, { param });
}

export function isApiError(value: unknown): value is ApiError {
  return value instanceof ApiError;
}

/**
 * Why the server, or a command, can not start or go on. Every such error has a stable code, and
 * the commands' exit path (cli/exit.ts) reads the code, never the error's class, to say what
 * happened and pick the exit status. Like the API's codes: add, never rename.
 */
export const startupCodes = {
  config_invalid: 'A setting, an environment variable or a flag has a value that can not be used.',
  model_files: "A model's files are missing, incomplete, or say something that can not be served exactly.",
  download_failed: 'A model could not be downloaded, or the Hub has it in a form that can not be served.',
  hub_unreachable: 'The Hugging Face Hub (or the mirror in HF_ENDPOINT) did not answer at all.',
  redis_unavailable: 'The Redis that search tasks are shared through can not be reached.',
  worker_start: 'A worker thread could not open or warm a model.',
  quantize_failed: 'The int8 variant of a model could not be made.',
  memory_budget: 'A model to load at start does not fit the memory budget even as one session.',
  device_unavailable:
    'A configured device (a GPU through an ONNX Runtime execution provider) can not be used on this machine.',
} as const;

export type StartupCode = keyof typeof startupCodes;

export abstract class StartupError extends Error {
  abstract readonly code: StartupCode;
}

export function isStartupError(value: unknown): value is StartupError {
  return value instanceof StartupError;
}
