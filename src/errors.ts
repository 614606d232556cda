/**
 * The error catalogue: every error the API can answer, by stable code.
 * Codes are public API: add new ones, never rename or repurpose old ones.
 * Every layer throws ApiError; only http/ turns it into a response.
 */
export const catalogue = {
  invalid_json: { status: 400, type: 'invalid_request_error', message: 'The request body is not valid JSON.' },
  invalid_request: { status: 400, type: 'invalid_request_error', message: 'The request is invalid.' },
  invalid_image: { status: 400, type: 'invalid_request_error', message: 'An input image can not be used.' },
  input_too_long: { status: 400, type: 'invalid_request_error', message: 'An input is longer than the model accepts.' },
  unauthorized: { status: 401, type: 'authentication_error', message: 'A valid API key is required: send "Authorization: Bearer <key>".' },
  model_not_found: { status: 404, type: 'invalid_request_error', message: 'The model does not exist or is not served here.' },
  route_not_found: { status: 404, type: 'invalid_request_error', message: 'No such route.' },
  not_found: { status: 404, type: 'invalid_request_error', message: 'No such resource.' },
  method_not_allowed: { status: 405, type: 'invalid_request_error', message: 'Method not allowed on this route.' },
  payload_too_large: { status: 413, type: 'invalid_request_error', message: 'The request body is too large.' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error', message: 'Unsupported content type: send application/json.' },
  overloaded: { status: 429, type: 'rate_limit_error', message: 'The server is overloaded: retry after the time in Retry-After.' },
  client_closed: { status: 499, type: 'invalid_request_error', message: 'The client closed the request.' },
  internal: { status: 500, type: 'server_error', message: 'Internal error.' },
  unsupported_operation: { status: 501, type: 'invalid_request_error', message: 'This operation is not supported by this server.' },
  upstream_error: { status: 502, type: 'server_error', message: 'An upstream service failed.' },
  not_ready: { status: 503, type: 'server_error', message: 'The server is starting: models are not warm yet.' },
  shutting_down: { status: 503, type: 'server_error', message: 'The server is shutting down.' },
  store_unavailable: { status: 503, type: 'server_error', message: 'The shared task store is not reachable.' },
  timeout: { status: 504, type: 'server_error', message: 'The operation timed out.' },
} as const satisfies Record<string, { status: number; type: string; message: string }>;

export type ErrorCode = keyof typeof catalogue;

export interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: ErrorCode };
}

export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly type: string;
  readonly param: string | null;
  /** Extra response headers, e.g. Retry-After for `overloaded`. */
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message?: string, options: { param?: string | null; headers?: Record<string, string>; cause?: unknown } = {}) {
    const entry = catalogue[code];
    super(message ?? entry.message, { cause: options.cause });
    this.name = 'ApiError';
    this.code = code;
    this.status = entry.status;
    this.type = entry.type;
    this.param = options.param ?? null;
    this.headers = options.headers ?? {};
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
