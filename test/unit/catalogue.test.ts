import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { catalogueTable } from '../../src/cli/models-list.js';
import { Catalogue, moderationCategories } from '../../src/models/catalogue.js';

describe('the shipped catalogue', () => {
  const catalogue = Catalogue.load();
  const hub = catalogue.list().filter((m) => m.source.kind === 'hub');

  it('pins at least 20 Hub embedders and rerankers, each by a full commit, one manifest per repository', () => {
    const pinned = hub.filter((m) => (m.source as { revision?: string }).revision !== undefined);
    expect(pinned.filter((m) => m.task !== 'classify').length).toBeGreaterThanOrEqual(20);
    expect(pinned.filter((m) => m.task === 'rerank').length).toBeGreaterThanOrEqual(5);
    const repos = hub.map((m) => (m.source as { repo: string }).repo);
    expect(new Set(repos).size).toBe(repos.length);
    for (const m of pinned) expect((m.source as { revision: string }).revision, m.id).toMatch(/^[0-9a-f]{40}$/);
    // Listed where no commit of theirs could be checked here: the classifiers, the Qwen3 rerankers and
    // two CLIP sizes.
    expect(
      hub
        .filter((m) => m.task !== 'classify' && !pinned.includes(m))
        .map((m) => m.id)
        .sort(),
    ).toEqual([
      'Qwen3-Reranker-0.6B',
      'Qwen3-Reranker-4B',
      'Qwen3-Reranker-8B',
      'clip-vit-base-patch16',
      'clip-vit-large-patch14',
    ]);
  });

  it('lists moderation classifiers with their label tables; an unpinned manifest claims no verification', () => {
    const moderation = hub.filter((m) => m.moderation);
    expect(moderation.map((m) => m.id).sort()).toEqual(['text-moderation', 'toxic-bert']);
    expect(catalogue.get('text-moderation')!.moderation!.categories).toMatchObject({
      S: 'sexual',
      S3: 'sexual/minors',
      V2: 'violence/graphic',
      OK: null,
    });
    for (const m of hub.filter((m) => (m.source as { revision?: string }).revision === undefined))
      expect(m.verified, m.id).toBe('none');
  });

  it('documents in docs/api.md, per moderation classifier, the OpenAI categories it does not judge', () => {
    const api = readFileSync('docs/api.md', 'utf8');
    for (const m of hub.filter((m) => m.moderation)) {
      const row = api.split('\n').find((line) => line.trimStart().startsWith(`| \`${m.id}\``));
      expect(row, m.id).toBeDefined();
      const mapped = new Set(Object.values(m.moderation!.categories));
      const notJudged = moderationCategories.filter((category) => !mapped.has(category));
      expect(
        row!
          .split('|')
          .at(-2)!
          .split(',')
          .map((c) => c.trim())
          .filter(Boolean)
          .sort(),
        m.id,
      ).toEqual([...notJudged].sort());
    }
  });

  it('refuses a moderation table naming a category OpenAI does not have, or on a model that is no classifier', () => {
    const dir = mkdtempSync(join(tmpdir(), 'onnx-gateway-catalogue-'));
    const write = (manifest: object) =>
      writeFileSync(
        join(dir, 'm.json'),
        JSON.stringify({ id: 'm', source: { kind: 'hub', repo: 'a/b' }, verified: 'none', ...manifest }),
      );
    write({ task: 'classify', moderation: { categories: { bad: 'spam' } } });
    expect(() => Catalogue.load(dir)).toThrow(/"spam" is not one of OpenAI's categories/);
    write({ task: 'rerank', moderation: { categories: { bad: 'hate' } } });
    expect(() => Catalogue.load(dir)).toThrow(/belongs to a "classify" model/);
    write({ task: 'classify', moderation: { categories: { bad: 'hate' }, threshold: 2 } });
    expect(() => Catalogue.load(dir)).toThrow(/threshold must be a number between 0 and 1/);
    write({ task: 'classify', verified: 'stand-in' });
    expect(() => Catalogue.load(dir)).toThrow(/without a pinned revision must say "verified": "none"/);
  });

  it('refuses a step before the cut that is not a layer norm with a positive epsilon, or on a model that is no embedder', () => {
    const dir = mkdtempSync(join(tmpdir(), 'onnx-gateway-catalogue-'));
    const write = (manifest: object) =>
      writeFileSync(
        join(dir, 'm.json'),
        JSON.stringify({ id: 'm', source: { kind: 'hub', repo: 'a/b' }, verified: 'none', ...manifest }),
      );
    write({ task: 'embedding', beforeCut: { step: 'rms-norm', epsilon: 1e-5 } });
    expect(() => Catalogue.load(dir)).toThrow(/beforeCut.step must be "layer-norm"/);
    for (const epsilon of [0, -1, '1e-5', null]) {
      write({ task: 'embedding', beforeCut: { step: 'layer-norm', epsilon } });
      expect(() => Catalogue.load(dir), String(epsilon)).toThrow(/beforeCut.epsilon must be a positive number/);
    }
    write({ task: 'rerank', beforeCut: { step: 'layer-norm', epsilon: 1e-5 } });
    expect(() => Catalogue.load(dir)).toThrow(/beforeCut belongs to an "embedding" model/);
    write({ task: 'embedding', beforeCut: { step: 'layer-norm', epsilon: 1e-5 } });
    expect(Catalogue.load(dir).get('m')!.beforeCut).toEqual({ step: 'layer-norm', epsilon: 1e-5 });
  });

  it("lists in docs/models.md's Matryoshka cuts every embedder with Matryoshka widths, with its widths and its step", () => {
    const text = readFileSync('docs/models.md', 'utf8');
    const section = text.slice(text.indexOf('## Matryoshka cuts'), text.indexOf('## Getting models'));
    const rows = new Map(
      section
        .split('\n')
        .filter((line) => line.startsWith('| '))
        .map((line) => line.split('|').map((cell) => cell.trim()))
        .map((cells) => [cells[1]!, { widths: cells[2]!, step: cells[3]! }] as const),
    );
    const matryoshka = hub.filter((m) => m.matryoshkaDimensions);
    expect(matryoshka.map((m) => m.id)).toContain('nomic-embed-text-v1.5');
    for (const m of matryoshka) {
      const row = rows.get(m.id);
      expect(row, m.id).toBeDefined();
      expect(row!.widths, m.id).toBe(m.matryoshkaDimensions!.join(', '));
      const epsilon = /^layer norm \(eps ([^)]+)\)$/.exec(row!.step)?.[1];
      if (m.beforeCut) expect(Number(epsilon), m.id).toBe(m.beforeCut.epsilon);
      else expect(row!.step, m.id).toMatch(/^none/);
    }
    // Every step the catalogue has is one the table shows.
    for (const m of hub.filter((m) => m.beforeCut)) expect(m.matryoshkaDimensions, m.id).toBeDefined();
  });

  it('finds a manifest by its short id and by its repo id', () => {
    expect(catalogue.get('bge-small-en-v1.5')?.id).toBe('bge-small-en-v1.5');
    expect(catalogue.get('BAAI/bge-small-en-v1.5')?.id).toBe('bge-small-en-v1.5');
    expect(catalogue.get('BAAI/nope')).toBeUndefined();
  });

  it('is the model table of docs/models.md (npm run docs)', () => {
    expect(readFileSync('docs/models.md', 'utf8')).toContain(catalogueTable(catalogue));
  });
});
