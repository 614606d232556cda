/**
 * Image documents in the local index: held beside the text documents, ranked by their own
 * model's vectors, and left out of every text ranking, the backfill and the text counts; a file
 * written before image documents existed opens with its documents as text.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DocumentIndex, type IndexDocument } from '../../src/search/index/document-index.js';
import { imageKey, indexDocumentOf } from '../../src/search/index/images.js';
import { applyOperation, upsertOperation } from '../../src/search/index/writes.js';
import { openDatabase } from '../../src/sqlite.js';

const dir = mkdtempSync(join(tmpdir(), 'onnx-gateway-index-images-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const text = (key: string, body: string): IndexDocument => ({
  key,
  url: `https://example.com/${key}`,
  title: '',
  text: body,
  source: 'test',
});
const unit = (...values: number[]) => {
  const norm = Math.hypot(...values);
  return values.map((v) => v / norm);
};

function image(key: string, alt: string) {
  return indexDocumentOf({
    key,
    url: `https://example.com/${key}.png`,
    title: key,
    alt,
    pageUrl: 'https://example.com/gallery',
    source: 'test',
    bytes: new Uint8Array(0),
  });
}

describe('image documents', () => {
  it('are ranked by their own vectors and kept out of the text rankings', () => {
    const index = DocumentIndex.open(':memory:');
    index.upsert([text('otters', 'otters hold hands'), text('rivers', 'the river runs')], {
      dense: { model: 'text-model', dimensions: 2, data: Float32Array.from([...unit(1, 0), ...unit(0, 1)]) },
    });
    // An alt text sharing the query's words must not reach BM25.
    index.upsert([image('otter-photo', 'otters hold hands'), image('sea-photo', 'the sea')], {
      dense: { model: 'clip', dimensions: 3, data: Float32Array.from([...unit(1, 1, 0), ...unit(0, 0, 1)]) },
    });

    expect(index.bm25('otters', 10).map((r) => index.documents([r.id]).get(r.id)!.key)).toEqual(['otters']);
    expect(index.dense(Float32Array.from(unit(1, 0)), 'text-model', 10)).toHaveLength(2);
    expect(index.dense(Float32Array.from(unit(1, 0, 0)), 'clip', 10)).toEqual([]);
    const ranked = index.dense(Float32Array.from(unit(1, 0, 0)), 'clip', 10, {}, 'image');
    expect(ranked.map((r) => index.documents([r.id]).get(r.id)!.key)).toEqual(['otter-photo', 'sea-photo']);
    expect(ranked[0]!.score).toBeCloseTo(Math.SQRT1_2, 6);

    const stored = index.documents([ranked[0]!.id]).get(ranked[0]!.id)!;
    expect(stored).toMatchObject({ kind: 'image', text: 'otters hold hands', title: 'otter-photo' });
    expect(stored.images).toEqual([
      { url: 'https://example.com/otter-photo.png', title: 'otter-photo', page_url: 'https://example.com/gallery' },
    ]);
    // Image documents are embedded from their pixels only: never offered to the text embedder's backfill.
    expect(index.withoutVectors('another-text-model', 10).map((d) => d.key)).toEqual(['otters', 'rivers']);
    expect(index.stats()).toMatchObject({
      documents: 2,
      vectors: { 'text-model': 2 },
      images: { documents: 2, vectors: { clip: 2 } },
    });
    index.close();
  });

  it('leave BM25 unchanged when replaced or removed, as a rebuild from the file finds it', () => {
    const index = DocumentIndex.open(':memory:');
    index.upsert([text('a', 'otters and rivers'), text('b', 'rivers only')]);
    expect(index.bm25('rivers', 10)).toHaveLength(2);
    index.upsert([image('pic', 'rivers rivers rivers')]);
    index.upsert([image('pic', 'otters')]);
    const before = index.bm25('rivers', 10);
    index.remove('pic');
    expect(index.bm25('rivers', 10)).toEqual(before);
    // A document that becomes an image under the same key leaves the text rankings.
    index.upsert([{ ...image('a', 'otters'), key: 'a' }]);
    expect(index.bm25('otters', 10)).toEqual([]);
    expect(index.stats().documents).toBe(1);
    index.close();
  });

  it('travel through the replication operations with their kind', () => {
    const source = DocumentIndex.open(':memory:');
    const copy = DocumentIndex.open(':memory:');
    const operation = JSON.parse(
      JSON.stringify(
        upsertOperation([image('pic', 'an otter')], {
          dense: { model: 'clip', dimensions: 2, data: Float32Array.from(unit(3, 4)) },
        }),
      ),
    ) as Parameters<typeof applyOperation>[1];
    applyOperation(source, operation);
    applyOperation(copy, operation);
    expect(copy.stats()).toEqual(source.stats());
    expect(copy.dense(Float32Array.from(unit(3, 4)), 'clip', 1, {}, 'image')[0]!.score).toBeCloseTo(1, 6);
    source.close();
    copy.close();
  });

  it('are keyed by a digest of their bytes when given no id or url', () => {
    expect(imageKey(Uint8Array.of(1, 2, 3))).toBe(imageKey(Uint8Array.of(1, 2, 3)));
    expect(imageKey(Uint8Array.of(1, 2, 3))).not.toBe(imageKey(Uint8Array.of(1, 2, 4)));
    expect(imageKey(Uint8Array.of(1, 2, 3))).toMatch(/^sha256:[0-9a-f]{64}$/);
  });
});

describe('an index file written before image documents', () => {
  it('opens with every document as text, and snapshots copy between old and new files', () => {
    const path = join(dir, 'old.sqlite');
    const old = openDatabase(path);
    old.exec(`
      CREATE TABLE documents (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, url TEXT NOT NULL, title TEXT NOT NULL,
        text TEXT NOT NULL, source TEXT NOT NULL, language TEXT, region TEXT, published_at INTEGER, images TEXT,
        added_at INTEGER NOT NULL);
      INSERT INTO documents (key, url, title, text, source, added_at) VALUES ('k', 'u', 't', 'otters swim', 's', 1);
    `);
    old.close();
    const index = DocumentIndex.open(path);
    expect(index.bm25('otters', 10)).toHaveLength(1);
    expect(index.stats()).toMatchObject({ documents: 1, images: { documents: 0 } });

    const fresh = DocumentIndex.open(join(dir, 'fresh.sqlite'));
    fresh.upsert([image('pic', 'an otter')]);
    index.loadSnapshot(fresh.serialize(), join(dir, 'scratch.sqlite'));
    expect(index.stats()).toMatchObject({ documents: 0, images: { documents: 1 } });
    index.close();
    fresh.close();
  });
});
