/**
 * The `searxng` provider: asks a SearXNG instance's JSON API (`/search?format=json`), maps its
 * results and reorders them with the served cross-encoder. Any upstream trouble (unreachable,
 * slow, an HTTP error, not its JSON, every engine failing) fails the task with a message that says
 * what to fix; nothing is left running.
 */
import { ApiError } from '../../errors.js';
import type { CoreContext } from '../../core/context.js';
import { redactUrl } from '../../redact-url.js';
import { rerank } from '../../core/rerank.js';
import { servedReranker } from '../index/rankings.js';
import { freshnessWindowMs } from '../request.js';
import type { Freshness, SearchImage, SearchOutcome, SearchProvider, SearchRequest, SearchResult } from '../types.js';
import { dedupeImages } from './local.js';
import { rankByThumbnail, type ThumbnailRanking } from './thumbnails.js';

export interface SearxngOptions {
  /** Base URL of the instance, e.g. http://127.0.0.1:8888 */
  url: string;
  /** Longest wait for one SearXNG answer, in ms. */
  timeoutMs: number;
  /** With a search image model: image results ordered by what their thumbnails show. */
  thumbnails?: ThumbnailRanking;
}

/** One result of SearXNG's JSON format (searx/webutils.py get_json_response). */
interface SearxngResult {
  url?: unknown;
  title?: unknown;
  content?: unknown;
  publishedDate?: unknown;
  engine?: unknown;
  engines?: unknown;
  score?: unknown;
  img_src?: unknown;
  thumbnail_src?: unknown;
  thumbnail?: unknown;
}

interface SearxngResponse {
  query?: unknown;
  number_of_results?: unknown;
  results?: unknown;
  unresponsive_engines?: unknown;
}

const timeRange: Partial<Record<Freshness, string>> = {
  oneDay: 'day',
  oneWeek: 'week',
  oneMonth: 'month',
  oneYear: 'year',
};

const str = (value: unknown): string | undefined => (typeof value === 'string' && value.length > 0 ? value : undefined);

function httpUrl(value: unknown): string | undefined {
  const text = str(value);
  if (!text) return undefined;
  try {
    const url = new URL(text);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : undefined;
  } catch {
    return undefined;
  }
}

export class SearxngSearchProvider implements SearchProvider {
  readonly name = 'searxng';
  private readonly base: URL;
  /** The instance's URL as messages name it: task errors reach the requester. */
  private readonly shown: string;
  private readonly headers: Record<string, string> = { accept: 'application/json' };

  constructor(
    private readonly ctx: CoreContext,
    private readonly options: SearxngOptions,
  ) {
    this.base = new URL('search', options.url.endsWith('/') ? options.url : `${options.url}/`);
    this.shown = redactUrl(options.url);
    // fetch refuses a URL with credentials: an instance behind basic auth gets them as a header.
    if (this.base.username || this.base.password) {
      const credentials = `${decodeURIComponent(this.base.username)}:${decodeURIComponent(this.base.password)}`;
      this.headers.authorization = `Basic ${Buffer.from(credentials).toString('base64')}`;
      this.base.username = '';
      this.base.password = '';
    }
  }

  async search(request: SearchRequest, signal: AbortSignal): Promise<SearchOutcome> {
    const [web, imageResults] = await Promise.all([
      this.query(request, undefined, signal),
      request.includeImages ? this.query(request, 'images', signal) : undefined,
    ]);
    const results = await this.rank(request, this.mapResults(request, web), signal);
    if (!imageResults) return { results };
    const found = (imageResults.results as SearxngResult[]).flatMap((item): SearchImage[] => {
      const url = httpUrl(item.img_src);
      if (!url) return [];
      return [
        {
          url,
          thumbnail_url: httpUrl(item.thumbnail_src) ?? httpUrl(item.thumbnail),
          title: str(item.title),
          page_url: httpUrl(item.url),
        },
      ];
    });
    const images = dedupeImages(found);
    if (!this.options.thumbnails) return { results, images: images.slice(0, request.count) };
    // SearXNG's order is its engines'; the first page's worth (twice the count) is reordered by what each shows.
    const looked = await rankByThumbnail(
      this.ctx,
      this.options.thumbnails,
      request.query,
      images.slice(0, 2 * request.count),
      signal,
    );
    return { results, images: looked.slice(0, request.count) };
  }

  private async query(
    request: SearchRequest,
    category: 'images' | undefined,
    signal: AbortSignal,
  ): Promise<SearxngResponse & { results: unknown[] }> {
    const url = new URL(this.base);
    url.searchParams.set('q', request.query);
    url.searchParams.set('format', 'json');
    url.searchParams.set('pageno', String(request.page));
    url.searchParams.set('language', request.area.language ? request.area.tag : 'all');
    const range = timeRange[request.freshness];
    if (range) url.searchParams.set('time_range', range);
    if (category) url.searchParams.set('categories', category);

    const timeout = AbortSignal.timeout(this.options.timeoutMs);
    let body: string;
    let status: number;
    try {
      const response = await fetch(url, { signal: AbortSignal.any([signal, timeout]), headers: this.headers });
      status = response.status;
      body = await response.text();
    } catch (error) {
      if (timeout.aborted)
        throw new ApiError('timeout', `SearXNG at ${this.shown} did not answer within ${this.options.timeoutMs} ms.`);
      if (signal.aborted) throw signal.reason;
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      throw new ApiError(
        'upstream_error',
        `SearXNG at ${this.shown} could not be reached: ${cause?.code ?? cause?.message ?? (error as Error).message}.`,
      );
    }
    if (status === 403) {
      throw new ApiError(
        'upstream_error',
        `SearXNG at ${this.shown} refused the JSON format (403): add "json" to search.formats in its settings.yml.`,
      );
    }
    if (status === 429)
      throw new ApiError(
        'upstream_error',
        `SearXNG at ${this.shown} is limiting requests (429): disable its limiter for this client or retry later.`,
      );
    if (status < 200 || status >= 300)
      throw new ApiError('upstream_error', `SearXNG at ${this.shown} answered HTTP ${status}.`);
    let parsed: SearxngResponse;
    try {
      parsed = JSON.parse(body) as SearxngResponse;
    } catch {
      throw new ApiError(
        'upstream_error',
        `SearXNG at ${this.shown} did not answer JSON; is the URL that of a SearXNG instance?`,
      );
    }
    if (typeof parsed !== 'object' || parsed === null || !Array.isArray(parsed.results)) {
      throw new ApiError('upstream_error', `SearXNG at ${this.shown} answered JSON without a results list.`);
    }
    const failed = Array.isArray(parsed.unresponsive_engines) ? parsed.unresponsive_engines : [];
    if (parsed.results.length === 0 && failed.length > 0) {
      const list = failed
        .map((entry) =>
          Array.isArray(entry) ? entry.filter((part) => typeof part === 'string').join(': ') : String(entry),
        )
        .join(', ');
      throw new ApiError('upstream_error', `Every SearXNG engine failed for this query: ${list}.`);
    }
    return parsed as SearxngResponse & { results: unknown[] };
  }

  private mapResults(request: SearchRequest, response: { results: unknown[] }): SearchResult[] {
    const cutoff = request.freshness === 'noLimit' ? undefined : Date.now() - freshnessWindowMs[request.freshness];
    const seen = new Set<string>();
    const results: SearchResult[] = [];
    for (const item of response.results as SearxngResult[]) {
      const url = httpUrl(item?.url);
      if (!url || seen.has(url)) continue;
      seen.add(url);
      const published = str(item.publishedDate) ? Date.parse(item.publishedDate as string) : NaN;
      // Engines without time-range support return older results too.
      if (cutoff !== undefined && Number.isFinite(published) && published < cutoff) continue;
      const engines = Array.isArray(item.engines) ? item.engines.filter((e): e is string => typeof e === 'string') : [];
      results.push({
        title: str(item.title) ?? url,
        url,
        snippet: str(item.content) ?? '',
        score: typeof item.score === 'number' ? item.score : 0,
        ...(Number.isFinite(published) ? { published_date: new Date(published).toISOString() } : {}),
        source: str(item.engine) ?? (engines.join(',') || 'searxng'),
      });
    }
    return results;
  }

  /** Orders results by the reranker's score (a cross-encoder, or a ColBERT model's MaxSim) over title and snippet; keeps SearXNG's order without a reranker. */
  private async rank(request: SearchRequest, results: SearchResult[], signal: AbortSignal): Promise<SearchResult[]> {
    const reranker = servedReranker(this.ctx);
    if (!reranker || results.length === 0) return results.slice(0, request.count);
    const scored = await rerank(
      this.ctx,
      { model: reranker, query: request.query, documents: results.map((r) => `${r.title}\n${r.snippet}`) },
      signal,
    );
    return scored.results.slice(0, request.count).map(({ index, score }) => ({ ...results[index]!, score }));
  }
}
