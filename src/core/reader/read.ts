/**
 * The web reader: fetch a page (through the guarded fetcher) and return its main content as
 * markdown, plain text or cleaned HTML, with its title and links. Readability finds the article;
 * turndown writes the markdown.
 */
import { Readability } from '@mozilla/readability';
import { parseHTML } from 'linkedom';
import TurndownService from 'turndown';
import { ApiError } from '../../errors.js';
import { fetchPage, type FetchLimits } from './fetch-page.js';

export type ReadFormat = 'markdown' | 'text' | 'html';

export interface ReadResult {
  url: string;
  title: string;
  byline: string | null;
  excerpt: string | null;
  format: ReadFormat;
  content: string;
  links: { text: string; url: string }[];
}

const turndown = new TurndownService({ headingStyle: 'atx', codeBlockStyle: 'fenced', bulletListMarker: '-' });

/** Links with absolute URLs, once each, in page order. */
function collectLinks(root: { querySelectorAll(selector: string): ArrayLike<unknown> }, base: string): ReadResult['links'] {
  const seen = new Set<string>();
  const links: ReadResult['links'] = [];
  for (const anchor of Array.from(root.querySelectorAll('a[href]')) as { getAttribute(name: string): string | null; textContent: string | null }[]) {
    let url: string;
    try {
      url = new URL(anchor.getAttribute('href') ?? '', base).href;
    } catch {
      continue;
    }
    if (!/^https?:/.test(url) || seen.has(url)) continue;
    seen.add(url);
    links.push({ text: (anchor.textContent ?? '').replace(/\s+/g, ' ').trim(), url });
  }
  return links;
}

/** Makes relative links and images absolute, so the markdown works outside the page. */
function absolutize(root: { querySelectorAll(selector: string): ArrayLike<unknown> }, base: string): void {
  for (const [selector, attribute] of [['a[href]', 'href'], ['img[src]', 'src']] as const) {
    for (const element of Array.from(root.querySelectorAll(selector)) as { getAttribute(n: string): string | null; setAttribute(n: string, v: string): void }[]) {
      try {
        element.setAttribute(attribute, new URL(element.getAttribute(attribute) ?? '', base).href);
      } catch {
        // leave a malformed reference as it is
      }
    }
  }
}

export async function readPage(url: string, format: ReadFormat, limits: FetchLimits, signal?: AbortSignal): Promise<ReadResult> {
  const page = await fetchPage(url, limits, signal);
  if (page.mediaType === 'text/plain' || page.mediaType === 'text/markdown') {
    return { url: page.url, title: '', byline: null, excerpt: null, format, content: page.body, links: [] };
  }
  if (page.mediaType !== 'text/html' && page.mediaType !== 'application/xhtml+xml') {
    throw new ApiError('unsupported_media_type', `The page is ${page.mediaType}; the reader reads HTML and plain text.`, { param: 'url' });
  }
  const { document } = parseHTML(page.body);
  absolutize(document, page.url);
  const title = (document.querySelector('title')?.textContent ?? '').trim();
  const article = new Readability(document as unknown as ConstructorParameters<typeof Readability>[0]).parse();
  // Without a recognisable article, fall back to the whole body.
  const html = article?.content ?? document.body?.innerHTML ?? '';
  const fragment = parseHTML(`<!doctype html><html><body>${html}</body></html>`).document;
  const links = collectLinks(fragment, page.url);
  const content =
    format === 'html' ? html.trim() : format === 'text' ? (article?.textContent ?? fragment.body?.textContent ?? '').replace(/[ \t]+\n/g, '\n').replace(/\n{3,}/g, '\n\n').trim() : turndown.turndown(html).trim();
  return {
    url: page.url,
    title: article?.title || title,
    byline: article?.byline ?? null,
    excerpt: article?.excerpt ?? null,
    format,
    content,
    links,
  };
}
