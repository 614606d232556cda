/**
 * The `x-cache-hits` response header of every dense embeddings route: how many of the response's
 * inputs came from the embedding cache instead of a model run. Absent when the server keeps no
 * cache, and for results it does not cache (sparse vectors).
 */
import type { FastifyReply } from 'fastify';
import type { EmbedResult } from '../core/embeddings.js';

export const cacheHitsHeader = 'x-cache-hits';

export function reportCacheHits(reply: FastifyReply, result: object): void {
  const hits = (result as Partial<EmbedResult>).cacheHits;
  if (hits !== undefined) reply.header(cacheHitsHeader, String(hits));
}
