/**
 * Turns every failure into the catalogue's error body. Bad input is a 4xx with a stable code;
 * only a bug is a 500, and it is logged with the request id.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { OutputKindError } from '../core/embeddings.js';
import { ApiError } from '../errors.js';
import { timedOut } from './client-signal.js';
import type { OutputKind } from '../models/heads.js';

/** "/documents/0/text" -> "documents[0].text" */
export function paramFromPath(path: string, missing?: string): string | null {
  const parts = path.split('/').filter(Boolean);
  if (missing) parts.push(missing);
  if (parts.length === 0) return null;
  return parts.reduce((name, part) => (/^\d+$/.test(part) ? `${name}[${part}]` : name ? `${name}.${part}` : part), '');
}

function fromFastifyError(error: FastifyError): ApiError {
  if (error.validation && error.validation.length > 0) {
    const first = error.validation[0]!;
    const params = first.params as Record<string, unknown> | undefined;
    const missing = typeof params?.missingProperty === 'string' ? params.missingProperty : undefined;
    const param = paramFromPath(first.instancePath ?? '', missing);
    const what = param ?? 'body';
    const message = missing ? `${what} is required.` : `${what} ${first.message ?? 'is invalid'}.`;
    return new ApiError('invalid_request', message, { param });
  }
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError(
        'invalid_json',
        error.code === 'FST_ERR_CTP_EMPTY_JSON_BODY'
          ? 'The request body is empty; send a JSON object.'
          : `The request body is not valid JSON: ${error.message}`,
      );
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError('payload_too_large');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError('unsupported_media_type');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ApiError('invalid_request', 'Content-Length does not match the body.');
  }
  if (error instanceof SyntaxError || (error.statusCode === 400 && /JSON/i.test(error.message))) {
    return new ApiError('invalid_json', `The request body is not valid JSON: ${error.message}`);
  }
  if (error.statusCode === 413) return new ApiError('payload_too_large');
  if (error.statusCode === 415) return new ApiError('unsupported_media_type');
  if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500)
    return new ApiError('invalid_request', error.message);
  return new ApiError('internal', undefined, { cause: error });
}

/** The routes each output kind is asked for by, for a model that does not give the kind asked for. */
const askedBy: Record<OutputKind, string> = {
  dense: '/v1/embeddings or /embed',
  sparse: '/v1/embeddings with "encoding_format": "sparse" or /embed_sparse',
  tokens: '/embed_all, or /v1/rerank for late interaction',
};

/** A domain error as this API tells it: core/ names no routes, so the routes that would serve the request are added here. */
export function inApiTerms(error: ApiError): ApiError {
  if (!(error instanceof OutputKindError)) return error;
  return new OutputKindError(error.model, error.wanted, error.gives, (kind) => askedBy[kind]);
}

/** Renders an error as a response body: the catalogue's shape, or a compatibility route's own (undefined: no body). */
export type ErrorRenderer = (error: ApiError) => unknown;
/** The status an error answers with: the catalogue's, or, on a route group whose API says otherwise, that API's. */
export type ErrorStatus = (error: ApiError) => number;

const catalogueShape: ErrorRenderer = (error) => error.toBody();
const catalogueStatus: ErrorStatus = (error) => error.status;

export function sendError(
  reply: FastifyReply,
  error: ApiError,
  render: ErrorRenderer = catalogueShape,
  statusOf: ErrorStatus = catalogueStatus,
): FastifyReply {
  if (error.retryAfterSeconds !== undefined) reply.header('retry-after', String(error.retryAfterSeconds));
  // The OpenAI SDK's header (others read it too): without it every 5xx is retried, twice by default.
  if (error.permanent && error.status >= 500) reply.header('x-should-retry', 'false');
  if (error.code === 'unauthorized') reply.header('www-authenticate', 'Bearer');
  const body = render(error);
  reply.code(statusOf(error));
  return body === undefined ? reply.send() : reply.type('application/json').send(body);
}

/** The error handler of the app; a route group that speaks another API's errors sets its own renderer (and statuses). */
export function errorHandler(render: ErrorRenderer = catalogueShape, statusOf: ErrorStatus = catalogueStatus) {
  return (raw: FastifyError | ApiError, request: FastifyRequest, reply: FastifyReply) => {
    let error = raw instanceof ApiError ? inApiTerms(raw) : fromFastifyError(raw);
    // Work dropped because the request's time was up, not because its client left.
    if (error.code === 'client_closed' && timedOut(request))
      error = new ApiError(
        'timeout',
        'The request did not finish within the requestTimeout setting; its work was dropped.',
      );
    if (error.code === 'internal') request.log.error({ err: raw.cause ?? raw }, 'internal error');
    else if (error.code === 'client_closed') request.log.info('client closed the request');
    // What the answer leaves out on purpose (where a refused address resolves to, say).
    else if (error.cause instanceof Error) request.log.info({ detail: error.cause.message }, error.message);
    return sendError(reply, error, render, statusOf);
  };
}

/**
 * Fastify's router answers some URLs before any route or hook runs (a path segment over its length
 * limit, a malformed %-escape): its `frameworkErrors` option sends them here, so they are the
 * catalogue's too.
 */
export function frameworkErrors(error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH')
    sendError(reply, new ApiError('url_too_long', 'A part of the URL path is over 100 characters.'));
  else if (error.code === 'FST_ERR_BAD_URL')
    sendError(reply, new ApiError('invalid_request', 'The URL path is not valid: a %-escape does not decode.'));
  else sendError(reply, fromFastifyError(error));
}

export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler(errorHandler());
  app.setNotFoundHandler((request, reply) =>
    sendError(reply, new ApiError('route_not_found', `No route ${request.method} ${request.url.split('?')[0]}.`)),
  );
}
