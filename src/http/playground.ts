/**
 * The playground at `/`: a static page that tries embeddings, rerank, web search and image edits
 * against this server's own API. The page is public; its API calls carry the key typed into it.
 */
import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';

// The files live beside this module (the build copies them into dist/http/playground) and are
// read once: they are small and never change while the server runs.
const folder = new URL('./playground/', import.meta.url);
const asset = (name: string, type: string) => ({ type, body: readFileSync(new URL(name, folder), 'utf8') });
const page = asset('index.html', 'text/html; charset=utf-8');
const assets = {
  'app.js': asset('app.js', 'text/javascript; charset=utf-8'),
  'style.css': asset('style.css', 'text/css; charset=utf-8'),
};

const hidden = { schema: { hide: true } };

export async function playgroundRoutes(app: FastifyInstance): Promise<void> {
  app.get('/', hidden, async (_request, reply) => reply.type(page.type).send(page.body));
  for (const [name, file] of Object.entries(assets)) {
    app.get(`/playground/${name}`, hidden, async (_request, reply) => reply.type(file.type).send(file.body));
  }
}
