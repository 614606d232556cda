/**
 * Writes to the local index as operations: what `index add`, the API and the backfill of vectors
 * do, in a form that can be sent to other replicas (replication.ts) and applied there the same
 * way. Both operations are idempotent by document key: applying one twice leaves the index as
 * applying it once.
 */
import type { DocumentIndex, DocumentVectors, IndexDocument } from './document-index.js';

export type IndexOperation =
  | {
      op: 'upsert';
      documents: IndexDocument[];
      /** One row per document, base64 of little-endian float32. */
      vectors?: { model: string; dimensions: number; data: string };
      /** When the writer added the documents (epoch ms), the same on every replica. */
      addedAt: number;
    }
  | { op: 'delete'; keys: string[] };

export interface WriteReport {
  added: number;
  updated: number;
  /** Index ids of the documents in this copy, in input order. */
  ids: number[];
}

/** Where writes go: straight into this process's index, or through the replication stream. */
export interface IndexWriter {
  upsert(documents: IndexDocument[], vectors?: DocumentVectors, signal?: AbortSignal): Promise<WriteReport>;
  /** False when no document has the key. */
  remove(key: string, signal?: AbortSignal): Promise<boolean>;
}

export function upsertOperation(documents: IndexDocument[], vectors?: DocumentVectors): IndexOperation {
  return {
    op: 'upsert',
    documents,
    ...(vectors
      ? { vectors: { model: vectors.model, dimensions: vectors.dimensions, data: Buffer.from(vectors.data.buffer, vectors.data.byteOffset, vectors.data.byteLength).toString('base64') } }
      : {}),
    addedAt: Date.now(),
  };
}

/** Applies an operation; what it did, as a writer reports it. */
export function applyOperation(index: DocumentIndex, operation: IndexOperation): WriteReport & { removed: number } {
  if (operation.op === 'delete') {
    let removed = 0;
    for (const key of operation.keys) if (index.remove(key)) removed++;
    return { added: 0, updated: 0, ids: [], removed };
  }
  let vectors: DocumentVectors | undefined;
  if (operation.vectors) {
    const bytes = Buffer.from(operation.vectors.data, 'base64');
    // Copied into its own buffer: a Float32Array needs 4-byte alignment.
    const data = new Float32Array(bytes.byteLength / 4);
    new Uint8Array(data.buffer).set(bytes);
    vectors = { model: operation.vectors.model, dimensions: operation.vectors.dimensions, data };
  }
  return { ...index.upsert(operation.documents, vectors, operation.addedAt), removed: 0 };
}

/** Writes straight into the index (no Redis configured). */
export class LocalIndexWriter implements IndexWriter {
  constructor(private readonly index: DocumentIndex) {}

  upsert(documents: IndexDocument[], vectors?: DocumentVectors): Promise<WriteReport> {
    return Promise.resolve(this.index.upsert(documents, vectors));
  }

  remove(key: string): Promise<boolean> {
    return Promise.resolve(this.index.remove(key));
  }
}
