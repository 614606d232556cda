/**
 * The shapes of the web search operation: a validated request, a provider's results, and the
 * task record that carries them from "pending" to "succeeded" or "failed".
 */

/** How recent results must be; `noLimit` means any date. */
export type Freshness = 'oneDay' | 'oneWeek' | 'oneMonth' | 'oneYear' | 'noLimit';

/** Where results should come from: worldwide, or a language with an optional region. */
export interface Area {
  /** The tag as given, normalised (`global`, `en`, `en-US`). */
  tag: string;
  /** Lower-case ISO 639 code; absent means worldwide. */
  language?: string;
  /** Upper-case ISO 3166 code (or UN M.49 digits). */
  region?: string;
}

export type ResultFormat = 'json' | 'markdown';

/** A search request after validation: every field present and in range. */
export interface SearchRequest {
  query: string;
  area: Area;
  freshness: Freshness;
  includeImages: boolean;
  /** 1-based. */
  page: number;
  count: number;
  format: ResultFormat;
}

export interface SearchResult {
  title: string;
  url: string;
  snippet: string;
  /** The full text, when the provider has it (the local index does). */
  content?: string;
  /** Higher is better: the cross-encoder's score when reranked, else the first stage's. */
  score: number;
  /** ISO 8601, when known. */
  published_date?: string;
  /** Where the result came from: the search engine (SearXNG) or the indexed source (local). */
  source: string;
}

export interface SearchImage {
  url: string;
  thumbnail_url?: string;
  title?: string;
  /** The page the image appears on. */
  page_url?: string;
  /** The image's alt text (an indexed image). */
  alt?: string;
  /**
   * Ranked by what it shows: the cosine similarity of the multimodal model's vectors of the query
   * and of the image. Absent for images that are only linked from matching results.
   */
  score?: number;
  /** Where an indexed image came from. */
  source?: string;
}

export interface SearchOutcome {
  results: SearchResult[];
  images?: SearchImage[];
}

export interface SearchProvider {
  readonly name: string;
  search(request: SearchRequest, signal: AbortSignal): Promise<SearchOutcome>;
  close?(): Promise<void> | void;
}

export type TaskState = 'pending' | 'running' | 'succeeded' | 'failed' | 'cancelled';

export interface TaskError {
  code: string;
  message: string;
}

/** A task as stored: times in epoch milliseconds. */
export interface StoredTask {
  id: string;
  owner: string;
  state: TaskState;
  request: SearchRequest;
  createdAt: number;
  startedAt: number | null;
  finishedAt: number | null;
  outcome: SearchOutcome | null;
  error: TaskError | null;
}

export const finalStates: ReadonlySet<TaskState> = new Set(['succeeded', 'failed', 'cancelled']);
