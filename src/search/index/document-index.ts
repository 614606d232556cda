/**
 * The local document index: one SQLite file with the documents and one float32 vector per
 * document from the served embedder; BM25 runs over an inverted index built from the documents in
 * memory (bm25.ts).
 *
 * Dense search is exact: every vector of the current embedder is held in one matrix in memory and
 * scored against the query (cosine: the vectors are normalised). That is a few milliseconds for
 * tens of thousands of documents; the matrix is reloaded when the file changes, also when another
 * process (the `index add` command) wrote to it. The inverted index is rebuilt the same way.
 *
 * Image documents live beside the text ones: their vector comes from a multimodal model's image
 * tower, their text is the image's alt text, and they are left out of every text ranking (BM25,
 * the text embedder's vectors, the backfill); they are ranked by the same model's text tower's
 * vector of the query (`dense(..., 'image')`).
 */
import { rmSync, writeFileSync } from 'node:fs';
import type { SparseVector } from '../../core/sparse.js';
import type { Scored } from '../fusion.js';
import { Bm25Index } from './bm25.js';
import { openDatabase, type SqliteDatabase } from '../../sqlite.js';
import type { SearchImage } from '../types.js';

export interface IndexDocument {
  /** Stable identity: adding a document with the same key replaces it. */
  key: string;
  url: string;
  title: string;
  text: string;
  /** What the document came from (a file path, a collection name). */
  source: string;
  /** Lower-case ISO 639 code. */
  language?: string;
  /** Upper-case ISO 3166 code. */
  region?: string;
  /** Epoch milliseconds. */
  publishedAt?: number;
  images?: SearchImage[];
  /** `image`: the document is an image (its `text` is the alt text); absent: a text document. */
  kind?: DocumentKind;
}

export type DocumentKind = 'text' | 'image';

export interface StoredDocument extends IndexDocument {
  id: number;
  addedAt: number;
}

export interface IndexFilter {
  /** Only documents published at or after this time (epoch ms); undated documents are left out. */
  since?: number;
  /** Documents in this language, or of unknown language. */
  language?: string;
  /** Documents of this region, or of unknown region. */
  region?: string;
}

export interface DocumentVectors {
  model: string;
  dimensions: number;
  /** One row per document, in the order of the documents. */
  data: Float32Array;
}

/** The last entry of the replication stream applied to this copy (replication.ts). */
export interface AppliedEntry {
  /** The Redis stream entry id. */
  id: string;
  /** The entry's place in the stream, counted from 1. */
  sequence: number;
}

/** Sparse vectors (a SPLADE model's term weights), one per document, in the order of the documents. */
export interface DocumentSparse {
  model: string;
  vectors: SparseVector[];
}

/** What the models made of a batch of documents, stored with them. */
export interface DocumentEncodings {
  dense?: DocumentVectors;
  sparse?: DocumentSparse;
}

export interface IndexStats {
  documents: number;
  /** Documents with a vector of each embedder. */
  vectors: Record<string, number>;
  /** Documents with a sparse vector of each sparse model. */
  sparse: Record<string, number>;
  /** Image documents, and those with a vector of each multimodal model. */
  images: { documents: number; vectors: Record<string, number> };
  updatedAt: number | null;
}

interface DocumentRow {
  id: number;
  key: string;
  url: string;
  title: string;
  text: string;
  source: string;
  language: string | null;
  region: string | null;
  published_at: number | null;
  images: string | null;
  added_at: number;
  kind: DocumentKind;
}

export class DocumentIndex {
  private readonly statements;
  /** The vectors of one model and kind of documents, by kind. */
  private readonly matrices = new Map<DocumentKind, VectorMatrix>();
  private lexical: { version: string; index: Bm25Index } | undefined;
  private sparseIndex:
    | { model: string; version: string; postings: Map<number, { ids: number[]; weights: number[] }>; documents: number }
    | undefined;
  private writes = 0;

  /** `path`: the file, or ':memory:'. */
  constructor(
    private readonly db: SqliteDatabase,
    readonly path = ':memory:',
  ) {
    db.exec(`
      CREATE TABLE IF NOT EXISTS documents (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL UNIQUE,
        url TEXT NOT NULL,
        title TEXT NOT NULL,
        text TEXT NOT NULL,
        source TEXT NOT NULL,
        language TEXT,
        region TEXT,
        published_at INTEGER,
        images TEXT,
        added_at INTEGER NOT NULL,
        kind TEXT NOT NULL DEFAULT 'text'
      );
      CREATE INDEX IF NOT EXISTS documents_published ON documents (published_at);
      -- Files written before BM25 moved into memory had an FTS5 table.
      DROP TABLE IF EXISTS documents_fts;
      CREATE TABLE IF NOT EXISTS document_vectors (
        document_id INTEGER PRIMARY KEY REFERENCES documents (id) ON DELETE CASCADE,
        model TEXT NOT NULL,
        dimensions INTEGER NOT NULL,
        vector BLOB NOT NULL
      );
      CREATE INDEX IF NOT EXISTS document_vectors_model ON document_vectors (model);
      CREATE TABLE IF NOT EXISTS document_sparse (
        document_id INTEGER PRIMARY KEY REFERENCES documents (id) ON DELETE CASCADE,
        model TEXT NOT NULL,
        indices BLOB NOT NULL,
        weights BLOB NOT NULL
      );
      CREATE INDEX IF NOT EXISTS document_sparse_model ON document_sparse (model);
      CREATE TABLE IF NOT EXISTS replication (
        one INTEGER PRIMARY KEY CHECK (one = 1),
        entry_id TEXT NOT NULL,
        sequence INTEGER NOT NULL
      );
    `);
    // Files written before image documents have no kind column (every document in them is text);
    // it is added last, where a new file has it, so snapshots copy between them column for column.
    const columns = db.prepare<unknown[], { name: string }>('PRAGMA table_info(documents)').all();
    if (!columns.some((column) => column.name === 'kind'))
      db.exec("ALTER TABLE documents ADD COLUMN kind TEXT NOT NULL DEFAULT 'text'");
    this.statements = {
      find: db.prepare<unknown[], { id: number }>('SELECT id FROM documents WHERE key = ?'),
      insert: db.prepare(
        'INSERT INTO documents (key, url, title, text, source, language, region, published_at, images, added_at, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
      ),
      update: db.prepare(
        'UPDATE documents SET url = ?, title = ?, text = ?, source = ?, language = ?, region = ?, published_at = ?, images = ?, added_at = ?, kind = ? WHERE id = ?',
      ),
      texts: db.prepare<unknown[], { id: number; title: string; text: string }>(
        "SELECT id, title, text FROM documents WHERE kind = 'text' ORDER BY id",
      ),
      text: db.prepare<unknown[], { title: string; text: string; kind: DocumentKind }>(
        'SELECT title, text, kind FROM documents WHERE id = ?',
      ),
      vectorDelete: db.prepare('DELETE FROM document_vectors WHERE document_id = ?'),
      vectorInsert: db.prepare(
        'INSERT OR REPLACE INTO document_vectors (document_id, model, dimensions, vector) VALUES (?, ?, ?, ?)',
      ),
      delete: db.prepare('DELETE FROM documents WHERE id = ?'),
      sparseDelete: db.prepare('DELETE FROM document_sparse WHERE document_id = ?'),
      sparseInsert: db.prepare(
        'INSERT OR REPLACE INTO document_sparse (document_id, model, indices, weights) VALUES (?, ?, ?, ?)',
      ),
      sparseCounts: db.prepare<unknown[], { model: string; n: number }>(
        'SELECT model, count(*) AS n FROM document_sparse GROUP BY model',
      ),
      sparseVectors: db.prepare<unknown[], { document_id: number; indices: Buffer; weights: Buffer }>(
        'SELECT document_id, indices, weights FROM document_sparse WHERE model = ? ORDER BY document_id',
      ),
      applied: db.prepare<unknown[], { entry_id: string; sequence: number }>(
        'SELECT entry_id, sequence FROM replication',
      ),
      setApplied: db.prepare('INSERT OR REPLACE INTO replication (one, entry_id, sequence) VALUES (1, ?, ?)'),
      count: db.prepare<unknown[], { n: number; updated: number | null }>(
        'SELECT count(*) AS n, max(added_at) AS updated FROM documents WHERE kind = ?',
      ),
      vectorCounts: db.prepare<unknown[], { model: string; n: number }>(
        'SELECT v.model, count(*) AS n FROM document_vectors v JOIN documents d ON d.id = v.document_id WHERE d.kind = ? GROUP BY v.model',
      ),
      vectors: db.prepare<unknown[], { document_id: number; dimensions: number; vector: Buffer }>(
        'SELECT v.document_id, v.dimensions, v.vector FROM document_vectors v JOIN documents d ON d.id = v.document_id WHERE v.model = ? AND d.kind = ? ORDER BY v.document_id',
      ),
      // Image documents are embedded from their pixels when added, never from their alt text.
      missing: db.prepare<unknown[], DocumentRow>(
        "SELECT d.* FROM documents d LEFT JOIN document_vectors v ON v.document_id = d.id AND v.model = ? WHERE v.document_id IS NULL AND d.kind = 'text' ORDER BY d.id LIMIT ?",
      ),
    };
  }

  static open(path: string): DocumentIndex {
    return new DocumentIndex(openDatabase(path), path);
  }

  /**
   * Adds documents, replacing those with the same key. `encodings` (optional) hold one dense
   * and one sparse vector per document; a replaced document without new ones loses its old ones.
   */
  upsert(
    documents: readonly IndexDocument[],
    encodings: DocumentEncodings = {},
    addedAt = Date.now(),
  ): { added: number; updated: number; ids: number[] } {
    const { dense: vectors, sparse } = encodings;
    if (vectors && vectors.data.length !== documents.length * vectors.dimensions) {
      throw new Error(`upsert: ${documents.length} documents but ${vectors.data.length / vectors.dimensions} vectors`);
    }
    if (sparse && sparse.vectors.length !== documents.length)
      throw new Error(`upsert: ${documents.length} documents but ${sparse.vectors.length} sparse vectors`);
    const changes: LexicalChange[] = [];
    const run = this.db.transaction(() => {
      let added = 0;
      let updated = 0;
      const ids: number[] = [];
      documents.forEach((doc, i) => {
        const fields = [
          doc.url,
          doc.title,
          doc.text,
          doc.source,
          doc.language ?? null,
          doc.region ?? null,
          doc.publishedAt ?? null,
          doc.images?.length ? JSON.stringify(doc.images) : null,
          addedAt,
          doc.kind ?? 'text',
        ];
        const existing = this.statements.find.get(doc.key);
        let id: number;
        if (existing) {
          id = existing.id;
          changes.push(...lexicalChange(this.statements.text.get(id)!, id, false));
          this.statements.update.run(...fields, id);
          this.statements.vectorDelete.run(id);
          this.statements.sparseDelete.run(id);
          updated++;
        } else {
          id = Number(this.statements.insert.run(doc.key, ...fields).lastInsertRowid);
          added++;
        }
        if (vectors) {
          const row = vectors.data.subarray(i * vectors.dimensions, (i + 1) * vectors.dimensions);
          this.statements.vectorInsert.run(
            id,
            vectors.model,
            vectors.dimensions,
            Buffer.from(row.buffer, row.byteOffset, row.byteLength),
          );
        }
        if (sparse) {
          const { indices, values } = sparse.vectors[i]!;
          this.statements.sparseInsert.run(id, sparse.model, bytesOf(indices), bytesOf(values));
        }
        changes.push(...lexicalChange(doc, id, true));
        ids.push(id);
      });
      return { added, updated, ids };
    });
    const result = run();
    this.afterWrite(changes);
    return result;
  }

  /** Documents that have no vector from `model` yet. */
  withoutVectors(model: string, limit: number): StoredDocument[] {
    return this.statements.missing.all(model, limit).map(fromRow);
  }

  remove(key: string): boolean {
    const existing = this.statements.find.get(key);
    if (!existing) return false;
    const changes = lexicalChange(this.statements.text.get(existing.id)!, existing.id, false);
    this.statements.delete.run(existing.id);
    this.afterWrite(changes);
    return true;
  }

  /** The index ids of the documents with these keys that are in the index, by key. */
  idsOf(keys: readonly string[]): Map<string, number> {
    const found = new Map<string, number>();
    for (const key of keys) {
      const row = this.statements.find.get(key);
      if (row) found.set(key, row.id);
    }
    return found;
  }

  /** The last replication entry applied here; undefined before the first. */
  applied(): AppliedEntry | undefined {
    const row = this.statements.applied.get();
    return row ? { id: row.entry_id, sequence: row.sequence } : undefined;
  }

  /**
   * Runs `write` and records `entry` as applied, in one transaction that takes the write lock at
   * once, so two processes applying the stream to the same file apply each entry once. An entry
   * at or before the recorded one is skipped (undefined); else returns what `write` returned.
   */
  applyEntry<T>(entry: AppliedEntry, write: () => T): T | undefined {
    const run = this.db.transaction(() => {
      if ((this.applied()?.sequence ?? 0) >= entry.sequence) return undefined;
      const result = write();
      this.statements.setApplied.run(entry.id, entry.sequence);
      return result;
    });
    try {
      const applied = run.immediate();
      this.afterWrite([]);
      return applied;
    } catch (error) {
      // Rolled back after `write` may have changed the in-memory BM25: rebuild it from the file.
      this.lexical = undefined;
      throw error;
    }
  }

  /** The whole file as one buffer, the replication state included (a snapshot for other replicas). */
  serialize(): Buffer {
    return this.db.serialize();
  }

  /**
   * Replaces every document, vector and the replication state with those of a serialized index,
   * in one transaction. The snapshot is written to `scratchFile` first: SQLite attaches files.
   */
  loadSnapshot(snapshot: Buffer, scratchFile: string): void {
    writeFileSync(scratchFile, snapshot);
    try {
      this.db.prepare('ATTACH DATABASE ? AS snapshot').run(scratchFile);
      try {
        this.db
          .transaction(() => {
            this.db.exec(`
            DELETE FROM document_vectors;
            DELETE FROM document_sparse;
            DELETE FROM documents;
            DELETE FROM replication;
            INSERT INTO documents SELECT * FROM snapshot.documents;
            INSERT INTO document_vectors SELECT * FROM snapshot.document_vectors;
            INSERT INTO document_sparse SELECT * FROM snapshot.document_sparse;
            INSERT INTO replication SELECT * FROM snapshot.replication;
          `);
          })
          .immediate();
      } finally {
        this.db.exec('DETACH DATABASE snapshot');
      }
    } finally {
      for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(`${scratchFile}${suffix}`, { force: true });
    }
    this.writes++;
  }

  stats(): IndexStats {
    const text = this.statements.count.get('text')!;
    const images = this.statements.count.get('image')!;
    const vectorsOf = (kind: DocumentKind) =>
      Object.fromEntries(this.statements.vectorCounts.all(kind).map((row) => [row.model, row.n]));
    const sparse: Record<string, number> = {};
    for (const row of this.statements.sparseCounts.all()) sparse[row.model] = row.n;
    const updated = Math.max(text.updated ?? -Infinity, images.updated ?? -Infinity);
    return {
      documents: text.n,
      vectors: vectorsOf('text'),
      sparse,
      images: { documents: images.n, vectors: vectorsOf('image') },
      updatedAt: Number.isFinite(updated) ? updated : null,
    };
  }

  documents(ids: readonly number[]): Map<number, StoredDocument> {
    const found = new Map<number, StoredDocument>();
    if (ids.length === 0) return found;
    for (let start = 0; start < ids.length; start += 500) {
      const slice = ids.slice(start, start + 500);
      const rows = this.db
        .prepare<unknown[], DocumentRow>(`SELECT * FROM documents WHERE id IN (${slice.map(() => '?').join(',')})`)
        .all(...slice);
      for (const row of rows) found.set(row.id, fromRow(row));
    }
    return found;
  }

  /** BM25 over title and text, best first. */
  bm25(query: string, limit: number, filter: IndexFilter = {}): Scored[] {
    return this.loadLexical().search(query, limit, this.allowedIds(filter));
  }

  /** Documents with a sparse vector of `model`. */
  sparseCount(model: string): number {
    return this.loadSparse(model).documents;
  }

  /** Dot products of the query's sparse vector with those of `model` (a SPLADE model's score), best first. */
  sparse(query: SparseVector, model: string, limit: number, filter: IndexFilter = {}): Scored[] {
    const { postings } = this.loadSparse(model);
    const allowed = this.allowedIds(filter);
    const scores = new Map<number, number>();
    for (let i = 0; i < query.indices.length; i++) {
      const list = postings.get(query.indices[i]!);
      if (!list) continue;
      const weight = query.values[i]!;
      for (let j = 0; j < list.ids.length; j++) {
        const id = list.ids[j]!;
        scores.set(id, (scores.get(id) ?? 0) + weight * list.weights[j]!);
      }
    }
    const ranked: Scored[] = [];
    for (const [id, score] of scores) if (!allowed || allowed.has(id)) ranked.push({ id, score });
    return ranked.sort((a, b) => b.score - a.score || a.id - b.id).slice(0, limit);
  }

  /** Documents of `kind` with a vector of `model`. */
  vectorCount(model: string, kind: DocumentKind = 'text'): number {
    return this.loadMatrix(model, kind).ids.length;
  }

  /** Exact cosine search over the vectors of `model` of documents of `kind`, best first. */
  dense(
    query: Float32Array,
    model: string,
    limit: number,
    filter: IndexFilter = {},
    kind: DocumentKind = 'text',
  ): Scored[] {
    const matrix = this.loadMatrix(model, kind);
    if (matrix.ids.length === 0) return [];
    if (query.length !== matrix.dimensions)
      throw new Error(`dense: query has ${query.length} dimensions, the index ${matrix.dimensions}`);
    const allowed = this.allowedIds(filter);
    const { ids, data, dimensions } = matrix;
    // Keep the best `limit` in a small sorted array: cheaper than sorting every score.
    const best: Scored[] = [];
    for (let row = 0; row < ids.length; row++) {
      const id = ids[row]!;
      if (allowed && !allowed.has(id)) continue;
      let dot = 0;
      const offset = row * dimensions;
      for (let d = 0; d < dimensions; d++) dot += data[offset + d]! * query[d]!;
      if (best.length < limit || dot > best[best.length - 1]!.score) {
        let at = best.length;
        while (at > 0 && best[at - 1]!.score < dot) at--;
        best.splice(at, 0, { id, score: dot });
        if (best.length > limit) best.pop();
      }
    }
    return best;
  }

  close(): void {
    if (this.db.open) this.db.close();
  }

  /** The ids a filter lets through; undefined when it lets everything through. */
  private allowedIds(filter: IndexFilter): Set<number> | undefined {
    const { clause, params } = filterClause(filter, 'd');
    if (!clause) return undefined;
    return new Set(
      this.db
        .prepare<unknown[], { id: number }>(`SELECT id FROM documents d WHERE ${clause}`)
        .all(...params)
        .map((r) => r.id),
    );
  }

  /** Changes when another connection wrote (data_version) or this one did (`writes`). */
  private version(): string {
    return `${String(this.db.pragma('data_version', { simple: true }))}:${this.writes}`;
  }

  /**
   * Counts a write of this connection. Its changes go into the in-memory BM25 when that was up to
   * date, instead of a rebuild from the file at the next query; a write from another connection
   * (data_version) still means a rebuild.
   */
  private afterWrite(changes: readonly LexicalChange[]): void {
    const lexical = this.lexical?.version === this.version() ? this.lexical : undefined;
    this.writes++;
    if (!lexical) return;
    for (const change of changes) {
      if (change.present) lexical.index.add(change.id, change.text);
      else lexical.index.remove(change.id, change.text);
    }
    // Removed documents stay in the posting lists until a rebuild; past as many as are left, rebuild.
    if (lexical.index.removed > lexical.index.size) this.lexical = undefined;
    else lexical.version = this.version();
  }

  private loadLexical(): Bm25Index {
    const version = this.version();
    if (this.lexical?.version === version) return this.lexical.index;
    const index = new Bm25Index();
    for (const row of this.statements.texts.iterate()) index.add(row.id, lexicalText(row));
    this.lexical = { version, index };
    return index;
  }

  /** The sparse vectors of `model` as an inverted index (term id -> documents and weights). */
  private loadSparse(model: string) {
    const version = this.version();
    if (this.sparseIndex?.model === model && this.sparseIndex.version === version) return this.sparseIndex;
    const postings = new Map<number, { ids: number[]; weights: number[] }>();
    let documents = 0;
    for (const row of this.statements.sparseVectors.iterate(model)) {
      const indices = new Int32Array(new Uint8Array(row.indices).buffer);
      const weights = new Float32Array(new Uint8Array(row.weights).buffer);
      for (let i = 0; i < indices.length; i++) {
        let list = postings.get(indices[i]!);
        if (!list) postings.set(indices[i]!, (list = { ids: [], weights: [] }));
        list.ids.push(row.document_id);
        list.weights.push(weights[i]!);
      }
      documents++;
    }
    this.sparseIndex = { model, version, postings, documents };
    return this.sparseIndex;
  }

  private loadMatrix(model: string, kind: DocumentKind): VectorMatrix {
    const version = this.version();
    const held = this.matrices.get(kind);
    if (held?.model === model && held.version === version) return held;
    const rows = this.statements.vectors.all(model, kind);
    const dimensions = rows[0]?.dimensions ?? 0;
    const ids = new Int32Array(rows.length);
    const data = new Float32Array(rows.length * dimensions);
    const bytes = new Uint8Array(data.buffer);
    rows.forEach((row, i) => {
      ids[i] = row.document_id;
      bytes.set(row.vector.subarray(0, dimensions * 4), i * dimensions * 4);
    });
    const matrix = { model, version, ids, dimensions, data };
    this.matrices.set(kind, matrix);
    return matrix;
  }
}

interface VectorMatrix {
  model: string;
  version: string;
  ids: Int32Array;
  dimensions: number;
  data: Float32Array;
}

/** A document's text for BM25 (title and text), or that it left the index. */
interface LexicalChange {
  id: number;
  text: string;
  present: boolean;
}

function bytesOf(array: Int32Array | Float32Array): Buffer {
  return Buffer.from(array.buffer, array.byteOffset, array.byteLength);
}

function lexicalText(doc: { title: string; text: string }): string {
  return doc.title ? `${doc.title} ${doc.text}` : doc.text;
}

/** A document's change to BM25: none for an image document, which is in no text ranking. */
function lexicalChange(
  doc: { title: string; text: string; kind?: DocumentKind },
  id: number,
  present: boolean,
): LexicalChange[] {
  return (doc.kind ?? 'text') === 'text' ? [{ id, text: lexicalText(doc), present }] : [];
}

function filterClause(filter: IndexFilter, alias: string): { clause: string; params: unknown[] } {
  const parts: string[] = [];
  const params: unknown[] = [];
  if (filter.since !== undefined) {
    parts.push(`${alias}.published_at >= ?`);
    params.push(filter.since);
  }
  if (filter.language) {
    parts.push(`(${alias}.language IS NULL OR ${alias}.language = ?)`);
    params.push(filter.language);
  }
  if (filter.region) {
    parts.push(`(${alias}.region IS NULL OR ${alias}.region = ?)`);
    params.push(filter.region);
  }
  return { clause: parts.join(' AND '), params };
}

function fromRow(row: DocumentRow): StoredDocument {
  return {
    id: row.id,
    key: row.key,
    url: row.url,
    title: row.title,
    text: row.text,
    source: row.source,
    language: row.language ?? undefined,
    region: row.region ?? undefined,
    publishedAt: row.published_at ?? undefined,
    images: row.images ? (JSON.parse(row.images) as SearchImage[]) : undefined,
    ...(row.kind === 'image' ? { kind: 'image' as const } : {}),
    addedAt: row.added_at,
  };
}
