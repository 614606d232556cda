/**
 * Error bodies of the compatibility route groups. The status is always the catalogue's; the body
 * takes the shape the other API's clients read, because they show `error` only when it is a
 * string (an object becomes "[object Object]" or a generic message).
 */
import type { TSchema } from 'typebox';

/** The error statuses a model route may answer, each described by `schema` in the OpenAPI document. */
export function errorResponsesOf(schema: TSchema): Record<400 | 401 | 403 | 404 | 413 | 415 | 429 | 503, TSchema> {
  return { 400: schema, 401: schema, 403: schema, 404: schema, 413: schema, 415: schema, 429: schema, 503: schema };
}
