/**
 * Image documents of the local index: pictures embedded by a multimodal model's image tower and
 * ranked by the same model's vector of a search's query text. The index keeps each image's vector
 * and what a result shows of it (url, title, alt text, the page it belongs to), not its pixels: the
 * url is where clients fetch the image from.
 */
import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { basename, extname, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { CoreContext } from '../../core/context.js';
import { embed } from '../../core/embeddings.js';
import { invalid } from '../../errors.js';
import type { SearchImage } from '../types.js';
import type { DocumentIndex, IndexDocument, IndexFilter } from './document-index.js';
import { count, inBatches, type IngestOptions, type IngestReport } from './ingest.js';
import { publishedDateOf, walk, type DocumentInput } from './sources.js';
import type { IndexWriter } from './writes.js';

export const imageExtensions = ['.png', '.jpg', '.jpeg', '.webp'];

/** An image to index: its encoded bytes (embedded, then let go) and what results show of it. */
export interface ImageDocument {
  /** Stable identity: an image with the key of an indexed one replaces it. */
  key: string;
  /** Where the image is: what results link to. */
  url: string;
  title: string;
  /** The image's alt text, shown with it (it is not searched: the pixels are). */
  alt?: string;
  /** The page the image belongs to. */
  pageUrl?: string;
  source: string;
  /** Epoch milliseconds. */
  publishedAt?: number;
  bytes: Uint8Array;
}

/** The key of an image given without an id or url: a digest of its bytes, so the same image is one document. */
export function imageKey(bytes: Uint8Array): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

/** An image document as a client gives it (the API's documents with an `image`), with the image's checked bytes. */
export function imageDocumentFromInput(
  input: DocumentInput & { alt?: unknown; page_url?: unknown },
  bytes: Uint8Array,
  param: string,
): ImageDocument {
  const text = (value: unknown) => (typeof value === 'string' ? value : undefined);
  const key = text(input.id) ?? text(input.url) ?? imageKey(bytes);
  return {
    key,
    url: text(input.url) ?? `urn:onnx-gateway:image:${encodeURIComponent(key)}`,
    title: (text(input.title) ?? '').trim(),
    alt: text(input.alt),
    pageUrl: text(input.page_url),
    source: text(input.source) ?? 'api',
    publishedAt: publishedDateOf(input, param),
    bytes,
  };
}

/**
 * As the index stores an image: an image document whose text is its alt text, and whose `images`
 * entry is the image itself as a search result shows it.
 */
export function indexDocumentOf(image: ImageDocument): IndexDocument {
  const shown: SearchImage = { url: image.url, ...(image.title ? { title: image.title } : {}) };
  if (image.pageUrl) shown.page_url = image.pageUrl;
  return {
    key: image.key,
    url: image.url,
    title: image.title,
    text: image.alt ?? '',
    source: image.source,
    publishedAt: image.publishedAt,
    images: [shown],
    kind: 'image',
  };
}

/** Embeds images with `model`'s image tower and writes them in batches, as ingestDocuments does texts. */
export async function ingestImages(
  ctx: CoreContext,
  writer: IndexWriter,
  model: string,
  images: AsyncIterable<ImageDocument> | Iterable<ImageDocument>,
  options: Omit<IngestOptions, 'embed'> = {},
): Promise<IngestReport> {
  const report: IngestReport = { added: 0, updated: 0, embedded: 0, ids: [] };
  await inBatches(images, options.batchSize ?? 32, async (taken) => {
    const result = await embed(ctx, { model, input: taken.map((image) => ({ image: image.bytes })) }, options.signal);
    const written = await writer.upsert(
      taken.map(indexDocumentOf),
      { dense: { model, dimensions: result.dimensions, data: result.vectors } },
      options.signal,
    );
    report.embedded += taken.length;
    count(report, written);
    options.onProgress?.(report);
  });
  return report;
}

/**
 * The image documents most like the query text, best first, scored by cosine similarity of the
 * model's text vector of the query (its query prompt, for a model that has one) to each image's.
 */
export async function rankImages(
  ctx: CoreContext,
  index: DocumentIndex,
  model: string,
  query: string,
  limit: number,
  filter: IndexFilter = {},
  signal?: AbortSignal,
): Promise<SearchImage[]> {
  if (index.vectorCount(model, 'image') === 0) return [];
  const vector = await embed(ctx, { model, input: [query], inputType: 'query', truncate: true }, signal);
  const ranked = index.dense(vector.vectors, model, limit, filter, 'image');
  const docs = index.documents(ranked.map((r) => r.id));
  return ranked.flatMap(({ id, score }) => {
    const doc = docs.get(id);
    if (!doc) return [];
    const shown = doc.images?.[0] ?? { url: doc.url };
    return [{ ...shown, ...(doc.text ? { alt: doc.text } : {}), score, source: doc.source }];
  });
}

/** Image files of folders (and files named), in a stable order; other files in a folder are skipped. */
export async function* readImageFiles(paths: readonly string[]): AsyncGenerator<ImageDocument> {
  for (const given of paths) {
    const root = resolve(given);
    const info = await stat(root).catch(() => undefined);
    if (!info) throw invalid('path', `${given} does not exist.`);
    if (info.isFile()) {
      if (!isImageFile(root))
        throw invalid('path', `${given}: index .png, .jpg, .jpeg or .webp images, or folders of them.`);
      yield await imageFile(root, basename(root));
      continue;
    }
    for await (const path of walk(root)) if (isImageFile(path)) yield await imageFile(path, relative(root, path));
  }
}

function isImageFile(path: string): boolean {
  return imageExtensions.includes(extname(path).toLowerCase());
}

async function imageFile(path: string, source: string): Promise<ImageDocument> {
  const url = pathToFileURL(path).href;
  return { key: url, url, title: basename(path, extname(path)), source, bytes: await readFile(path) };
}
