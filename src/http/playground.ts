/**
 * The playground at `/`: a static page that tries embeddings, rerank, web search and image edits
 * against this server's own API. The page is public; its API calls carry the key typed into it.
 */
import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';

// Static files live beside this module (the build copies them into dist/http/playground).
const folder = new URL('./playground/', import.meta.url);
const files: Record<string, { type: string; body: string }> = {
  'index.html': { type: 'text/html; charset=utf-8', body: readFileSync(new URL('index.html', folder), 'utf8') },
  'app.js': { type: 'text/javascript; charset=utf-8', body: readFileSync(new URL('app.js', folder), 'utf8') },
  'style.css': { type: 'text/css; charset=utf-8', body: readFileSync(new URL('style.css', folder), 'utf8') },
};

export async function playgroundRoutes(app: FastifyInstance): Promise<void> {
  const send = (name: string) => async (_request: unknown, reply: import('fastify').FastifyReply) =>
    reply.type(files[name]!.type).send(files[name]!.body);
  app.get('/', { schema: { hide: true } as never }, send('index.html'));
  for (const name of ['app.js', 'style.css']) app.get(`/playground/${name}`, { schema: { hide: true } as never }, send(name));
}
