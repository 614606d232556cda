/**
 * The in-memory BM25 of the local index: the Porter stemmer against SQLite FTS5's `porter`
 * tokenizer (an independent implementation of the same algorithm), and scores against the BM25
 * formula written out for a three-document corpus.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { openDatabase } from '../../src/sqlite.js';
import { describe, expect, it } from 'vitest';
import { Bm25Index, analyze } from '../../src/search/index/bm25.js';
import { DocumentIndex, type IndexDocument } from '../../src/search/index/document-index.js';
import { porterStem } from '../../src/search/index/porter-stemmer.js';
import { sparseDot } from '../../src/core/sparse.js';

describe('Porter stemmer', () => {
  it('stems as FTS5 does', () => {
    const docs = readdirSync('docs')
      .filter((file) => file.endsWith('.md'))
      .map((file) => `docs/${file}`);
    const text = ['README.md', 'ARCHITECTURE.md', ...docs].map((file) => readFileSync(file, 'utf8')).join(' ');
    const classic =
      'caresses ponies ties caress cats feed agreed plastered bled motoring sing conflated troubled sized hopping tanned falling hissing fizzed failing filing happy sky relational conditional rational valenci hesitanci digitizer conformabli radicalli differentli vileli analogousli vietnamization predication operator feudalism decisiveness hopefulness callousness formaliti sensitiviti sensibiliti triplicate formative formalize electriciti electrical hopeful goodness revival allowance inference airliner gyroscopic adjustable defensible irritant replacement adjustment dependent adoption homologou communism activate angulariti homologous effective bowdlerize probate rate cease controll roll generalizations oscillators';
    const words = [...new Set([...classic.split(' '), ...(text.toLowerCase().match(/[a-z]+/g) ?? [])])];
    const db = openDatabase(':memory:');
    db.exec(
      `CREATE VIRTUAL TABLE words USING fts5(word, tokenize = 'porter ascii'); CREATE VIRTUAL TABLE stems USING fts5vocab(words, 'instance');`,
    );
    const insert = db.prepare('INSERT INTO words (rowid, word) VALUES (?, ?)');
    db.transaction(() => words.forEach((word, i) => insert.run(i + 1, word)))();
    const rows = db.prepare<unknown[], { term: string; doc: number }>('SELECT term, doc FROM stems').all();
    expect(rows).toHaveLength(words.length);
    const differing = rows
      .filter((row) => porterStem(words[row.doc - 1]!) !== row.term)
      .map((row) => `${words[row.doc - 1]} -> ${row.term}`);
    expect(differing).toEqual([]);
    db.close();
  });

  it('leaves short and non-ASCII words alone', () => {
    expect(porterStem('is')).toBe('is');
    expect(porterStem('größe')).toBe('größe');
    expect(analyze('Café CONNECTIONS, naïve')).toEqual(['cafe', 'connect', 'naiv']);
  });
});

describe('BM25', () => {
  const docs = ['otters sleep holding hands', 'sea otters and river otters', 'the river runs to the sea'];
  const k1 = 1.2;
  const b = 0.75;
  /** The formula written out: Lucene's idf, term frequency saturated by k1, length normalised by b. */
  function expected(query: string[], doc: number): number {
    const terms = docs.map((text) => analyze(text));
    const average = terms.reduce((sum, t) => sum + t.length, 0) / docs.length;
    let score = 0;
    for (const term of query) {
      const df = terms.filter((t) => t.includes(term)).length;
      const tf = terms[doc]!.filter((t) => t === term).length;
      if (tf === 0) continue;
      const idf = Math.log(1 + (docs.length - df + 0.5) / (df + 0.5));
      score += (idf * tf * (k1 + 1)) / (tf + k1 * (1 - b + (b * terms[doc]!.length) / average));
    }
    return score;
  }

  it('scores by the formula, counting repeated query terms, best first', () => {
    const index = new Bm25Index({ k1, b });
    docs.forEach((text, i) => index.add(100 + i, text));
    const results = index.search('otters of the sea, river otters', 10);
    expect(results.map((r) => r.id)).toEqual([101, 100, 102]);
    for (const { id, score } of results)
      expect(score).toBeCloseTo(expected(['otter', 'sea', 'river', 'otter'], id - 100), 10);
    expect(index.search('otters', 10, new Set([100])).map((r) => r.id)).toEqual([100]);
    expect(index.search('the of', 10).map((r) => r.id)).toEqual([102]);
    expect(index.search('zebra', 10)).toEqual([]);
  });
});

describe('BM25 of the document index', () => {
  const doc = (key: string, text: string): IndexDocument => ({
    key,
    url: `https://example.org/${key}`,
    title: '',
    text,
    source: 'test',
  });
  const corpus = [
    doc('a', 'sea otters hold hands while they sleep'),
    doc('b', 'river otters build dens in river banks'),
    doc('c', 'beavers build dams across rivers'),
    doc('d', 'herons stand in shallow water'),
  ];

  it('after replacing and removing documents ranks as an index built from the result', () => {
    const updated = DocumentIndex.open(':memory:');
    updated.upsert(corpus);
    const keysOf = (index: DocumentIndex, ids: number[]) => ids.map((id) => index.documents([id]).get(id)!.key);
    // The first query builds the in-memory index; the writes after it update it in place.
    expect(
      keysOf(
        updated,
        updated.bm25('otters', 10).map((s) => s.id),
      ),
    ).toEqual(['a', 'b']);
    updated.upsert([doc('b', 'river otters and sea otters'), doc('e', 'sea otters eat urchins')]);
    updated.remove('a');
    updated.remove('d');

    const rebuilt = DocumentIndex.open(':memory:');
    rebuilt.upsert([corpus[2]!, doc('b', 'river otters and sea otters'), doc('e', 'sea otters eat urchins')]);
    // Scores by key (ids differ between the two, and so do the orders of ties).
    const scores = (index: DocumentIndex, query: string) =>
      Object.fromEntries(
        index.bm25(query, 10).map((s) => [index.documents([s.id]).get(s.id)!.key, Number(s.score.toFixed(12))]),
      );
    for (const query of ['otters', 'sea otters', 'build dams', 'herons water', 'river']) {
      expect(scores(updated, query)).toEqual(scores(rebuilt, query));
    }
    expect(updated.bm25('herons', 10)).toEqual([]);
    updated.close();
    rebuilt.close();
  });
});

describe('sparse ranking of the document index', () => {
  it('scores by the dot product of sparse vectors, best first, within the filter', () => {
    const index = DocumentIndex.open(':memory:');
    const vectors = [
      { indices: new Int32Array([1, 5, 900]), values: new Float32Array([0.5, 2, 1]) },
      { indices: new Int32Array([5]), values: new Float32Array([3]) },
      { indices: new Int32Array([2, 900]), values: new Float32Array([1, 4]) },
    ];
    const docs = ['a', 'b', 'c'].map((key, i): IndexDocument => ({
      key,
      url: key,
      title: '',
      text: key,
      source: 't',
      language: i === 1 ? 'de' : 'en',
    }));
    const { ids } = index.upsert(docs, { sparse: { model: 'splade', vectors } });
    const query = { indices: new Int32Array([5, 900, 4000]), values: new Float32Array([1, 0.5, 9]) };
    const expected = vectors
      .map((v, i) => ({ id: ids[i]!, score: sparseDot(query, v) }))
      .sort((x, y) => y.score - x.score);
    expect(index.sparse(query, 'splade', 10)).toEqual(expected);
    expect(index.sparse(query, 'splade', 10, { language: 'en' }).map((s) => s.id)).toEqual(
      expected.filter((s) => s.id !== ids[1]).map((s) => s.id),
    );
    expect(index.stats().sparse).toEqual({ splade: 3 });
    // Replaced without a sparse vector, a document leaves the sparse ranking.
    index.upsert([docs[1]!]);
    expect(index.sparseCount('splade')).toBe(2);
    index.close();
  });
});
