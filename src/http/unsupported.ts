/**
 * The other operation groups of an OpenAI-style gateway, answered with 501 until they exist here,
 * so clients get a clear answer instead of a 404 that looks like a wrong base URL. (Moderations
 * answer 501 the same way when no moderation classifier is served: http/moderations.ts.)
 */
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors.js';

const groups: Record<string, string[]> = {
  'chat completions': ['/v1/chat/completions', '/v1/chat/completions/*'],
  completions: ['/v1/completions'],
  responses: ['/v1/responses', '/v1/responses/*'],
  'image generation': ['/v1/images/generations', '/v1/images/variations'],
  audio: ['/v1/audio/*'],
  videos: ['/v1/videos', '/v1/videos/*'],
  realtime: ['/v1/realtime', '/v1/realtime/*'],
};

export async function unsupportedRoutes(app: FastifyInstance): Promise<void> {
  for (const [name, paths] of Object.entries(groups)) {
    for (const url of paths) {
      app.route({
        method: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
        url,
        schema: { hide: true },
        handler: async () => {
          throw new ApiError(
            'unsupported_operation',
            `${name[0]!.toUpperCase()}${name.slice(1)} is not supported by this server (yet); it serves embeddings, rerank, classification and moderation.`,
          );
        },
      });
    }
  }
}
