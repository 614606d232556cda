/**
 * Drop-in routes for clients of other embedding and rerank servers: TEI, Cohere (v2) and Ollama.
 * Each is a thin adapter over the same core operations as /v1, behind the same auth and limits.
 */
import type { FastifyInstance } from 'fastify';
import type { HttpServices } from '../services.js';
import { cohereRoutes } from './cohere.js';
import { ollamaRoutes } from './ollama.js';
import { teiRoutes } from './tei.js';

export async function compatRoutes(app: FastifyInstance, services: HttpServices): Promise<void> {
  // Each group is its own plugin context, so each answers errors in its own shape.
  await app.register(teiRoutes, services);
  await app.register(cohereRoutes, services);
  await app.register(ollamaRoutes, services);
}
