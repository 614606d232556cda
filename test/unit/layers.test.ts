/**
 * The layering of ARCHITECTURE.md over src/'s import graph: http -> core -> engine -> worker, each
 * importing only itself and the layer right below; search, batch and images sit beside core, at its
 * layer (http/ imports them; search and batch use core's inference operations, images the engine's
 * image lane; core imports none of them); side modules import side modules only; the entry points (main.ts, cli/)
 * compose everything and nothing but cli/ imports them. Below http/, nothing speaks HTTP but the
 * clients of other servers.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const src = fileURLToPath(new URL('../../src', import.meta.url));
/** What each layer may import besides itself and the side modules. */
const below: Record<string, string[]> = {
  http: ['core', 'search', 'batch', 'images'],
  // The local index embeds its documents and queries, and results are reranked: search consumes core's operations.
  search: ['core'],
  // A batch's requests run through core's operations, as the routes' do.
  batch: ['core'],
  // Edits run their tiles on the engine's image lane.
  images: ['engine'],
  core: ['engine'],
  engine: ['worker'],
  worker: [],
};
const layers = Object.keys(below);
const side = [
  ...[
    'config',
    'errors',
    'abort',
    'duration',
    'version',
    'v8-flags',
    'threadpool',
    'devices',
    'redact-url',
    'answer-size',
    'sqlite',
    'redis',
  ],
  'image-header',
  'libvips',
  'tracing',
  ...['models', 'text', 'vectors', 'onnx', 'quantize'],
];
const entries = ['main', 'cli'];
const folderOf = (file: string) =>
  relative(src, file)
    .split('/')[0]!
    .replace(/\.[jt]s$/, '');
const sources = (folder: string) =>
  readdirSync(folder, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => join(folder, f));

function allowed(from: string, to: string): boolean {
  if (from === to || entries.includes(from)) return true;
  if (side.includes(to)) return true;
  if (side.includes(from) || entries.includes(to)) return false;
  return below[from]!.includes(to);
}

it('imports in src/ run down one layer at a time', () => {
  const files = sources(src);
  expect(files.length).toBeGreaterThan(50);
  const wrong: string[] = [];
  for (const file of files) {
    const from = folderOf(file);
    expect([...layers, ...side, ...entries], `${relative(src, file)} is in no layer`).toContain(from);
    for (const [, specifier] of readFileSync(file, 'utf8').matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)) {
      const to = folderOf(resolve(dirname(file), specifier!));
      if (!allowed(from, to)) wrong.push(`${relative(src, file)} imports ${specifier} (${from} -> ${to})`);
    }
  }
  expect(wrong).toEqual([]);
});

/**
 * HTTP's words: its headers, statuses and the server's routes. The layers below http/ raise domain
 * errors (a code, a message, the seconds to wait) and http/ maps them; a route or a status named below
 * it is a message or a decision made in the wrong place. The web reader and the SearXNG provider are
 * HTTP clients of other servers: speaking HTTP is their work.
 */
const httpNames: [string, RegExp][] = [
  ['a header', /retry-after|x-should-retry|www-authenticate|content-type|\bheaders\s*:/i],
  [
    'a status',
    /\bstatus(?:Code)?\s*(?:===?|!==?|[<>]=?|:)\s*\d{3}\b|\bstatusCode\b|\b(?:HTTP|an?)\s+[45]\d\d\b(?![-\w])/,
  ],
  [
    'a route',
    /['"`(\s]\/(?:v\d|api|embed\w*|rerank|predict|similarity|tokenize|decode|info|health|metrics|search|read)\b/,
  ],
  ['the web framework', /\bfastify\b|\breply\.\w/i],
];

const httpClients = ['search/reader/', 'search/providers/searxng.ts'];

it('names no HTTP header, status or route under core/, search/, batch/, images/ and engine/', () => {
  const files = ['core', 'search', 'batch', 'images', 'engine'].flatMap((layer) => sources(join(src, layer)));
  const found: string[] = [];
  for (const file of files.filter((f) => !httpClients.some((client) => relative(src, f).startsWith(client)))) {
    readFileSync(file, 'utf8')
      .split('\n')
      .forEach((line, i) => {
        for (const [what, pattern] of httpNames)
          if (pattern.test(line)) found.push(`${relative(src, file)}:${i + 1} names ${what}: ${line.trim()}`);
      });
  }
  expect(found).toEqual([]);
});

it('finds the HTTP names it looks for', () => {
  const named = (line: string) => httpNames.filter(([, pattern]) => pattern.test(line)).map(([what]) => what);
  expect(named(`throw new ApiError('overloaded', 'full', { headers: { 'retry-after': '5' } });`)).toEqual(['a header']);
  expect(named('if (error.statusCode === 429) return;')).toEqual(['a status']);
  expect(named('/** The model, refused with a 400 when it does not give `kind`. */')).toEqual(['a status']);
  expect(named("const askedBy = { dense: '/v1/embeddings or /embed' };")).toEqual(['a route']);
  expect(named('reply.header(name, value);')).toEqual(['the web framework']);
  // Words that only look alike: a batch of 512 tokens, a model's load status, paths on disk.
  expect(named('const lookahead = 512; // a 512-token input')).toEqual([]);
  expect(named("if (entry.status === 'loaded') return;")).toEqual([]);
  expect(named("join(dir, 'models', 'tokenizer.json')")).toEqual([]);
});
