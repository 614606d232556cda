/**
 * Bearer-key auth for the API routes. Keys are compared as SHA-256 digests with
 * timingSafeEqual, so neither a key's content nor its length leaks through timing.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { ApiError } from '../errors.js';

const digest = (key: string) => createHash('sha256').update(key).digest();

export function bearerAuth(keys: string[]): (request: FastifyRequest) => Promise<void> {
  const digests = keys.map(digest);
  return async (request) => {
    const header = request.headers.authorization;
    const match = typeof header === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!match) throw new ApiError('unauthorized');
    const presented = digest(match[1]!);
    let ok = false;
    for (const candidate of digests) ok = timingSafeEqual(candidate, presented) || ok;
    if (!ok) throw new ApiError('unauthorized', 'The API key is not valid.');
  };
}
