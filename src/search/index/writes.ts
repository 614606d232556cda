/**
 * Writes to the local index as operations: what `index add`, the API and the backfill of vectors
 * do, in a form that can be sent to other replicas (replication.ts) and applied there the same
 * way. Both operations are idempotent by document key: applying one twice leaves the index as
 * applying it once.
 */
import type { DocumentEncodings, DocumentIndex, DocumentVectors, IndexDocument } from './document-index.js';

export type IndexOperation =
  | {
      op: 'upsert';
      documents: IndexDocument[];
      /** One row per document, base64 of little-endian float32. */
      vectors?: { model: string; dimensions: number; data: string };
      /** One sparse vector per document: base64 of int32 indices and of float32 weights. */
      sparse?: { model: string; vectors: { indices: string; values: string }[] };
      /** When the writer added the documents (epoch ms), the same on every replica. */
      addedAt: number;
    }
  | { op: 'delete'; keys: string[] }
  /**
   * Through Redis: upsert the documents of these keys as the replication's document hash holds
   * them (each an `upsert` of one document), so the stream does not keep a copy of every version.
   */
  | { op: 'upsert-stored'; keys: string[] };

export interface WriteReport {
  added: number;
  updated: number;
  /** Index ids of the documents in this copy, in input order. */
  ids: number[];
}

/** Where writes go: straight into this process's index, or through the replication stream. */
export interface IndexWriter {
  upsert(documents: IndexDocument[], encodings?: DocumentEncodings, signal?: AbortSignal): Promise<WriteReport>;
  /** False when no document has the key. */
  remove(key: string, signal?: AbortSignal): Promise<boolean>;
}

const base64 = (array: Int32Array | Float32Array) =>
  Buffer.from(array.buffer, array.byteOffset, array.byteLength).toString('base64');

/** Copied into a buffer of its own: typed arrays need aligned offsets. */
function fromBase64<T extends Int32Array | Float32Array>(text: string, Type: new (buffer: ArrayBuffer) => T): T {
  const bytes = Buffer.from(text, 'base64');
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return new Type(copy.buffer);
}

/** One upsert per document, each with its own vectors: what the replication stores per key. */
export function upsertOperations(
  documents: IndexDocument[],
  { dense, sparse }: DocumentEncodings = {},
): IndexOperation[] {
  const addedAt = Date.now();
  return documents.map((document, i) => {
    const row = dense && { ...dense, data: dense.data.subarray(i * dense.dimensions, (i + 1) * dense.dimensions) };
    const vector = sparse?.vectors[i];
    return {
      ...upsertOperation([document], {
        dense: row,
        sparse: sparse && vector && { model: sparse.model, vectors: [vector] },
      }),
      addedAt,
    };
  });
}

export function upsertOperation(documents: IndexDocument[], { dense, sparse }: DocumentEncodings = {}): IndexOperation {
  return {
    op: 'upsert',
    documents,
    ...(dense ? { vectors: { model: dense.model, dimensions: dense.dimensions, data: base64(dense.data) } } : {}),
    ...(sparse
      ? {
          sparse: {
            model: sparse.model,
            vectors: sparse.vectors.map((v) => ({ indices: base64(v.indices), values: base64(v.values) })),
          },
        }
      : {}),
    addedAt: Date.now(),
  };
}

/** Applies an operation; what it did, as a writer reports it. */
export function applyOperation(index: DocumentIndex, operation: IndexOperation): WriteReport & { removed: number } {
  if (operation.op === 'upsert-stored')
    throw new Error('an upsert-stored operation is applied with the documents it names');
  if (operation.op === 'delete') {
    let removed = 0;
    for (const key of operation.keys) if (index.remove(key)) removed++;
    return { added: 0, updated: 0, ids: [], removed };
  }
  const { vectors, sparse } = operation;
  const encodings: DocumentEncodings = {
    ...(vectors
      ? {
          dense: {
            model: vectors.model,
            dimensions: vectors.dimensions,
            data: fromBase64(vectors.data, Float32Array),
          } satisfies DocumentVectors,
        }
      : {}),
    ...(sparse
      ? {
          sparse: {
            model: sparse.model,
            vectors: sparse.vectors.map((v) => ({
              indices: fromBase64(v.indices, Int32Array),
              values: fromBase64(v.values, Float32Array),
            })),
          },
        }
      : {}),
  };
  return { ...index.upsert(operation.documents, encodings, operation.addedAt), removed: 0 };
}

/** Writes straight into the index (no Redis configured). */
export class LocalIndexWriter implements IndexWriter {
  constructor(private readonly index: DocumentIndex) {}

  upsert(documents: IndexDocument[], encodings?: DocumentEncodings): Promise<WriteReport> {
    return Promise.resolve(this.index.upsert(documents, encodings));
  }

  remove(key: string): Promise<boolean> {
    return Promise.resolve(this.index.remove(key));
  }
}
