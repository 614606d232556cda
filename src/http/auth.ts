/**
 * Bearer-key auth for the API routes. Keys are compared as SHA-256 digests with
 * timingSafeEqual, so neither a key's content nor its length leaks through timing. The accepted
 * key's digest is kept on the request: routes that keep things per key (search tasks) read it
 * there instead of parsing the header again.
 */
import { hash, timingSafeEqual } from 'node:crypto';
import fp from 'fastify-plugin';
import { ApiError } from '../errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** SHA-256 (hex) of the API key the request was let in with; null when the server has no keys. */
    apiKeyDigest: string | null;
  }
}

// One-shot: a Hash object per request costs several times more on the main thread.
const digest = (key: string): Buffer => hash('sha256', key, 'buffer');

/**
 * A plugin without a context of its own (fastify-plugin), so its hook and its request decoration
 * apply to the routes registered beside it.
 */
export const apiKeyAuth = fp<{ keys: string[] }>(
  async (app, { keys }) => {
    app.decorateRequest('apiKeyDigest', null);
    if (keys.length === 0) return;
    const digests = keys.map(digest);
    app.addHook('onRequest', (request, _reply, done) => {
      const header = request.headers.authorization;
      const match = typeof header === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
      if (!match) return done(new ApiError('unauthorized'));
      const presented = digest(match[1]!);
      let ok = false;
      for (const candidate of digests) ok = timingSafeEqual(candidate, presented) || ok;
      if (!ok) return done(new ApiError('unauthorized', 'The API key is not valid.'));
      request.apiKeyDigest = presented.toString('hex');
      done();
    });
  },
  { name: 'api-key-auth' },
);
