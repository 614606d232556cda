/**
 * JSON request bodies, parsed as fastify parses them, except an empty one on a route whose body is
 * optional: curl users send `content-type: application/json` by habit, also with no body (`curl -X
 * POST .../unload -H 'content-type: application/json'`), and there it means no options. A route's
 * body is optional when it has no body schema or its schema admits no body (fastify validates a
 * missing body as null); a route that needs a body still answers "The request body is empty".
 */
import type { FastifyBodyParser, FastifyInstance, FastifyRequest } from 'fastify';

declare module 'fastify' {
  interface FastifyRequest {
    /** How long parsing the JSON body took (null: no JSON body); routes report it with their timings. */
    parseMs: number | null;
  }
}

function bodyIsOptional(request: FastifyRequest): boolean {
  const validate = request.getValidationFunction('body') as ((body: unknown) => boolean) | undefined;
  return typeof validate !== 'function' || validate(null);
}

export function parseJsonBodies(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.decorateRequest('parseMs', null);
  const parse: FastifyBodyParser<string> = (request, body, done) => {
    if (body.length === 0 && bodyIsOptional(request)) done(null, undefined);
    else {
      const started = performance.now();
      void parseJson(request, body, (error, value) => {
        request.parseMs = performance.now() - started;
        done(error, value);
      });
    }
  };
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, parse);
}
