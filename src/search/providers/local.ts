/**
 * The `local` provider: searches the document index on disk (hybrid BM25 + dense retrieval, then
 * the cross-encoder). Works with no network at all.
 */
import type { IndexFilter } from '../index/document-index.js';
import type { LocalRetriever } from '../index/retriever.js';
import { freshnessWindowMs } from '../request.js';
import { bestSnippet } from '../snippet.js';
import type { SearchImage, SearchOutcome, SearchProvider, SearchRequest, SearchResult } from '../types.js';

/** First-stage candidates per retriever, at least. */
const minCandidates = 100;
/** Most documents the cross-encoder scores for one task, however deep the page. */
const maxRerankDepth = 100;
/** Longest `content` returned per result. */
const maxContentChars = 20_000;

export function filterFor(request: SearchRequest, now = Date.now()): IndexFilter {
  const filter: IndexFilter = {};
  if (request.freshness !== 'noLimit') filter.since = now - freshnessWindowMs[request.freshness];
  if (request.area.language) filter.language = request.area.language;
  if (request.area.region) filter.region = request.area.region;
  return filter;
}

export class LocalSearchProvider implements SearchProvider {
  readonly name = 'local';

  constructor(private readonly retriever: LocalRetriever) {}

  async search(request: SearchRequest, signal: AbortSignal): Promise<SearchOutcome> {
    const end = request.page * request.count;
    const filter = filterFor(request);
    const candidates = await this.retriever.hybrid(request.query, Math.max(minCandidates, end), filter, signal);
    const { rerankDepth } = this.retriever.options;
    // The requested page is reranked whole (up to a bound on the cross-encoder's work), so a page
    // does not mix score scales.
    const depth = rerankDepth > 0 ? Math.max(rerankDepth, Math.min(end, maxRerankDepth)) : 0;
    const { ranked } = await this.retriever.rerank(request.query, candidates, depth, signal);
    const page = ranked.slice(end - request.count, end);
    const docs = this.retriever.documents(page.map((r) => r.id));
    const results: SearchResult[] = [];
    const images: SearchImage[] = [];
    for (const { id, score } of page) {
      const doc = docs.get(id);
      if (!doc) continue;
      results.push({
        title: doc.title,
        url: doc.url,
        snippet: bestSnippet(doc.text, request.query),
        content: doc.text.length > maxContentChars ? doc.text.slice(0, maxContentChars) : doc.text,
        score,
        ...(doc.publishedAt !== undefined ? { published_date: new Date(doc.publishedAt).toISOString() } : {}),
        source: doc.source,
      });
      if (request.includeImages) images.push(...(doc.images ?? []));
    }
    if (!request.includeImages) return { results };
    // Indexed images ranked by what they show, then those the results link to.
    const shown = await this.retriever.images(request.query, request.count, filter, signal);
    return { results, images: [...shown, ...dedupeImages(images).slice(0, request.count)].filter(firstOfUrl()) };
  }
}

export function dedupeImages(images: SearchImage[]): SearchImage[] {
  return images.filter(firstOfUrl());
}

/** A filter that keeps the first image of each url. */
function firstOfUrl(): (image: SearchImage) => boolean {
  const seen = new Set<string>();
  return (image) => !seen.has(image.url) && (seen.add(image.url), true);
}
