/**
 * Adds documents to the local index in batches: each batch is embedded by the served embedder
 * (when there is one) and written with its vectors in one write (one transaction, or one entry of
 * the replication stream).
 */
import type { CoreContext } from '../../core/context.js';
import { embed } from '../../core/embeddings.js';
import { embedSparse } from '../../core/sparse.js';
import type { DocumentEncodings, DocumentIndex, IndexDocument } from './document-index.js';
import { servedModel } from './rankings.js';
import { modelText } from './retriever.js';
import type { IndexWriter, WriteReport } from './writes.js';

export interface IngestOptions {
  /** Compute vectors (default: when an embedder is served). */
  embed?: boolean;
  batchSize?: number;
  onProgress?: (progress: IngestReport) => void;
  signal?: AbortSignal;
}

export interface IngestReport {
  added: number;
  updated: number;
  /** Documents given a vector. */
  embedded: number;
  /** Index ids of the documents, in input order. */
  ids: number[];
}

export async function ingestDocuments(
  /** Absent: documents are indexed without vectors. */
  ctx: CoreContext | undefined,
  writer: IndexWriter,
  documents: AsyncIterable<IndexDocument> | Iterable<IndexDocument>,
  options: IngestOptions = {},
): Promise<IngestReport> {
  const embedder = options.embed === false || !ctx ? undefined : servedModel(ctx, 'dense');
  // A served sparse model (SPLADE) gives every document its sparse vector too, for the `sparse` ranking.
  const sparseModel = options.embed === false || !ctx ? undefined : servedModel(ctx, 'sparse');
  const report: IngestReport = { added: 0, updated: 0, embedded: 0, ids: [] };
  await inBatches(documents, options.batchSize ?? 64, async (docs) => {
    const encodings: DocumentEncodings = {};
    if (embedder) {
      const result = await embed(
        ctx!,
        { model: embedder, input: docs.map(modelText), inputType: 'document', truncate: true },
        options.signal,
      );
      encodings.dense = { model: embedder, dimensions: result.dimensions, data: result.vectors };
      report.embedded += docs.length;
    }
    if (sparseModel) {
      const result = await embedSparse(
        ctx!,
        { model: sparseModel, input: docs.map(modelText), inputType: 'document', truncate: true },
        options.signal,
      );
      encodings.sparse = { model: sparseModel, vectors: result.vectors };
    }
    count(report, await writer.upsert(docs, encodings, options.signal));
    options.onProgress?.(report);
  });
  return report;
}

/** Runs `write` on consecutive batches of up to `size` items, in order. */
export async function inBatches<T>(
  items: AsyncIterable<T> | Iterable<T>,
  size: number,
  write: (batch: T[]) => Promise<void>,
): Promise<void> {
  let batch: T[] = [];
  for await (const item of items) {
    batch.push(item);
    if (batch.length < size) continue;
    await write(batch);
    batch = [];
  }
  if (batch.length > 0) await write(batch);
}

/** Adds a write's counts and ids to a report. */
export function count(report: IngestReport, written: WriteReport): void {
  report.added += written.added;
  report.updated += written.updated;
  report.ids.push(...written.ids);
}

/** Gives vectors of the served embedder to documents that lack them (added without, or under another embedder). */
export async function embedMissing(
  ctx: CoreContext,
  index: DocumentIndex,
  writer: IndexWriter,
  options: Omit<IngestOptions, 'embed'> = {},
): Promise<number> {
  const embedder = servedModel(ctx, 'dense');
  if (!embedder) return 0;
  const batchSize = options.batchSize ?? 64;
  let done = 0;
  for (;;) {
    const docs = index.withoutVectors(embedder, batchSize);
    if (docs.length === 0) return done;
    const result = await embed(
      ctx,
      { model: embedder, input: docs.map(modelText), inputType: 'document', truncate: true },
      options.signal,
    );
    // Written as the documents again with their vectors: one kind of write, replicated like the others.
    const documents = docs.map(({ id: _id, addedAt: _addedAt, ...doc }) => doc);
    await writer.upsert(
      documents,
      { dense: { model: embedder, dimensions: result.dimensions, data: result.vectors } },
      options.signal,
    );
    done += docs.length;
  }
}
