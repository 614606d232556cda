/**
 * `onnx-gateway index add` as a user runs it: a folder of Markdown, text, HTML and JSONL files
 * indexed by the built command, then found through the HTTP API of a server on the same data dir.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Server } from '../../src/main.js';
import { auth, startServer } from '../helpers/server.js';

const run = promisify(execFile);

/** A search task as GET /v1/web-search/search/:id answers it when it has succeeded (the fields read here). */
interface SearchTask {
  id: string;
  state: string;
  results: { title: string; url: string; content?: string; source: string; published_date?: string }[];
  images: { url: string }[];
}

let root: string;
let docs: string;
let dataDir: string;
let env: NodeJS.ProcessEnv;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'onnx-gateway-cli-'));
  docs = join(root, 'docs');
  dataDir = join(root, 'data');
  await mkdir(join(docs, 'notes'), { recursive: true });
  await writeFile(
    join(docs, 'notes', 'otters.md'),
    `---\ntitle: Sea otters\ndate: ${new Date().toISOString().slice(0, 10)}\nlanguage: en-US\n---\n# Otters\n\nSea otters hold hands while they sleep so they do not drift apart.\n`,
  );
  await writeFile(join(docs, 'glaciers.txt'), 'Glaciers are slow rivers of ice that carve valleys.');
  await writeFile(
    join(docs, 'volcano.html'),
    '<html lang="de"><head><title>Vulkane</title><meta property="article:published_time" content="2020-05-01T10:00:00Z"></head>' +
      '<body><nav>Menu</nav><h1>Vulkane</h1><p>Ein Vulkan ist eine geologische Struktur, volcano.</p><img src="lava.png" alt="Lava"><script>var x = 1;</script></body></html>',
  );
  await writeFile(
    join(docs, 'extra.jsonl'),
    `${JSON.stringify({ _id: 'deserts', title: 'Deserts', text: 'Deserts receive very little rain.', metadata: {} })}\n`,
  );
  await writeFile(join(docs, 'ignored.pdf'), 'not indexed');
  env = {
    ...process.env,
    ONNX_GATEWAY_MODELS_DIR: inject('tinyModelsDir'),
    ONNX_GATEWAY_MODELS: 'tiny-embedder,tiny-reranker',
    ONNX_GATEWAY_WORKERS: '1',
  };
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('onnx-gateway index', () => {
  it('adds a folder and reports what it holds', async () => {
    const { stdout, stderr } = await run('node', ['dist/cli/index.js', 'index', 'add', docs, '--data-dir', dataDir], {
      env,
    });
    expect(stderr).toMatch(/added 4, replaced 0, embedded 4/);
    expect(JSON.parse(stdout)).toMatchObject({ documents: 4, vectors: { 'tiny-embedder': 4 } });
    const again = await run(
      'node',
      ['dist/cli/index.js', 'index', 'add', join(docs, 'glaciers.txt'), '--data-dir', dataDir, '--no-embed'],
      { env },
    );
    expect(again.stderr).toMatch(/added 0, replaced 1, embedded 0/);
    const stats = await run('node', ['dist/cli/index.js', 'index', 'stats', '--data-dir', dataDir], { env });
    // The replaced document lost its vector (added without one); the next `add` with vectors backfills it.
    expect(JSON.parse(stats.stdout)).toMatchObject({ documents: 4, vectors: { 'tiny-embedder': 3 } });
  });

  it('refuses a path that does not exist, with a message', async () => {
    const failure = await run(
      'node',
      ['dist/cli/index.js', 'index', 'add', join(root, 'missing'), '--data-dir', dataDir],
      { env },
    ).catch((error: { code: number; stderr: string }) => error);
    expect(failure).toMatchObject({ code: 2 });
    expect((failure as { stderr: string }).stderr).toMatch(/missing does not exist/);
  });

  describe('a server on the same data dir', () => {
    let server: Server;
    beforeAll(async () => {
      server = await startServer({ dataDir });
    });
    afterAll(() => server?.close());

    async function search(body: object) {
      const created = await server.app.inject({
        method: 'POST',
        url: '/v1/web-search/search',
        payload: body,
        headers: auth,
      });
      return (
        await server.app.inject({
          method: 'GET',
          url: `/v1/web-search/search/${created.json<{ id: string }>().id}?wait=30`,
          headers: auth,
        })
      ).json<SearchTask>();
    }

    it('finds the files with their titles, languages, dates and images', async () => {
      const task = await search({ query: 'otters sleep volcano', includeImages: true });
      expect(task.state).toBe('succeeded');
      const otters = task.results.find((r) => r.title === 'Sea otters')!;
      expect(otters).toMatchObject({ source: join('notes', 'otters.md') });
      expect(otters.url).toMatch(/^file:\/\/.*otters\.md$/);
      const volcano = task.results.find((r) => r.title === 'Vulkane')!;
      expect(volcano).toMatchObject({ published_date: '2020-05-01T10:00:00.000Z' });
      expect(volcano.content).toContain('Ein Vulkan ist');
      expect(volcano.content).not.toContain('Menu');
      expect(volcano.content).not.toContain('var x');
      expect(task.images.map((i) => i.url)).toEqual([expect.stringMatching(/^file:\/\/.*lava\.png$/)]);
    });

    it('filters them by the language and date found in the files', async () => {
      const english = await search({ query: 'otters volcano glaciers deserts', area: 'en', freshness: 'oneWeek' });
      expect(english.results.map((r) => r.title)).toEqual(['Sea otters']);
      const german = await search({ query: 'otters volcano', area: 'de' });
      expect(german.results.map((r) => r.title)).not.toContain('Sea otters');
    });
  });
});
