/**
 * The `x-cache-hits` response header of every embeddings route: how many of the response's inputs
 * came from the embedding cache instead of a model run. Absent when the server keeps no cache.
 */
import type { FastifyReply } from 'fastify';
import type { EmbedResult } from '../core/embeddings.js';

export const cacheHitsHeader = 'x-cache-hits';

export function reportCacheHits(reply: FastifyReply, result: Pick<EmbedResult, 'cacheHits'>): void {
  if (result.cacheHits !== undefined) reply.header(cacheHitsHeader, String(result.cacheHits));
}
