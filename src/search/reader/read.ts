/**
 * The web reader: fetch a page (through the guarded fetcher, fetch-page.ts) and return its main
 * content as markdown, plain text or cleaned HTML, with its title and links. The conversion runs in
 * worker threads with a time limit (page-parser.ts): the main thread only fetches.
 */
import { ApiError } from '../../errors.js';
import type { ConvertedPage, ReadFormat } from './convert.js';
import { fetchPage, type FetchLimits } from './fetch-page.js';
import { PageParser } from './page-parser.js';

export type { ReadFormat };

export interface ReadResult extends ConvertedPage {
  url: string;
  format: ReadFormat;
}

export interface ReaderOptions {
  fetch: FetchLimits;
  /** Longest the conversion of one page may take, in ms. */
  parseTimeoutMs: number;
}

/**
 * Pages converted at once. The reader is a side route: two threads keep one slow page from
 * holding up every other read without taking the cores the models run on.
 */
const parseThreads = 2;
/** A thread's heap: a page at the largest size allowed parses in well under this. */
const parseHeapMb = 768;

export class Reader {
  private readonly parser: PageParser;

  constructor(private readonly options: ReaderOptions) {
    this.parser = new PageParser({ threads: parseThreads, timeoutMs: options.parseTimeoutMs, heapMb: parseHeapMb });
  }

  async read(url: string, format: ReadFormat, signal?: AbortSignal): Promise<ReadResult> {
    const page = await fetchPage(url, this.options.fetch, signal);
    if (page.mediaType === 'text/plain' || page.mediaType === 'text/markdown') {
      return { url: page.url, title: '', byline: null, excerpt: null, format, content: page.body, links: [] };
    }
    if (page.mediaType !== 'text/html' && page.mediaType !== 'application/xhtml+xml') {
      throw new ApiError(
        'unsupported_media_type',
        `The page is ${page.mediaType}; the reader reads HTML and plain text.`,
        { param: 'url' },
      );
    }
    const converted = await this.parser.convert({ html: page.body, url: page.url, format }, signal);
    return { url: page.url, format, ...converted };
  }

  close(): Promise<void> {
    return this.parser.close();
  }
}
