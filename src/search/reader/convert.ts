/**
 * A fetched HTML page to its main content as markdown, plain text or cleaned HTML, with its title
 * and links: Readability finds the article on a linkedom DOM, turndown writes the markdown. It runs
 * in the reader's worker threads (parse-worker.ts), never on the main thread: its time grows with
 * the page, which the requester chooses.
 */
import { Readability } from '@mozilla/readability';
import { parseHTML as parseLinkedom } from 'linkedom';
import TurndownService from 'turndown';
import { capDocumentWhitespace, capWhitespaceRuns } from './whitespace.js';

export type ReadFormat = 'markdown' | 'text' | 'html';

export interface ConvertedPage {
  title: string;
  byline: string | null;
  excerpt: string | null;
  content: string;
  links: { text: string; url: string }[];
}

const turndown = new TurndownService({ headingStyle: 'atx', codeBlockStyle: 'fenced', bulletListMarker: '-' });

type Root = { querySelectorAll(selector: string): ArrayLike<unknown> };

/** What the reader uses of a parsed page. */
interface PageDocument extends Root {
  createTreeWalker(
    root: unknown,
    whatToShow: number,
  ): { nextNode(): { nodeType: number; nodeName: string; data?: string; remove(): void } | null };
  querySelector(selector: string): { textContent: string | null } | null;
  body: { innerHTML: string; textContent: string | null } | null;
}

// linkedom types its answer as the DOM's `Window`, which this node-only project does not declare.
const parseHTML = (html: string) => parseLinkedom(html) as unknown as { document: PageDocument };

/** Links with absolute URLs, once each, in page order. */
function collectLinks(root: Root, base: string): ConvertedPage['links'] {
  const seen = new Set<string>();
  const links: ConvertedPage['links'] = [];
  for (const anchor of Array.from(root.querySelectorAll('a[href]')) as {
    getAttribute(name: string): string | null;
    textContent: string | null;
  }[]) {
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
function absolutize(root: Root, base: string): void {
  for (const [selector, attribute] of [
    ['a[href]', 'href'],
    ['img[src]', 'src'],
  ] as const) {
    for (const element of Array.from(root.querySelectorAll(selector)) as {
      getAttribute(n: string): string | null;
      setAttribute(n: string, v: string): void;
    }[]) {
      try {
        element.setAttribute(attribute, new URL(element.getAttribute(attribute) ?? '', base).href);
      } catch {
        // leave a malformed reference as it is
      }
    }
  }
}

/**
 * Plain text: no spaces or tabs before a line end, at most one blank line in a row. Each match of
 * `[ \t]+\n?` takes its whole run, so this is linear (`[ \t]+\n` alone retries a long run from each
 * of its characters).
 */
function tidyText(text: string): string {
  return text
    .replace(/[ \t]+(\n)?/g, (run: string, newline?: string) => newline ?? run)
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

/** `html` is the page's text; `url` is where it was fetched from (after redirects), for absolute links. */
export function convertPage(html: string, url: string, format: ReadFormat): ConvertedPage {
  const { document } = parseHTML(capWhitespaceRuns(html).text);
  capDocumentWhitespace(document, document);
  absolutize(document, url);
  const title = (document.querySelector('title')?.textContent ?? '').trim();
  const article = new Readability(document).parse();
  // Without a recognisable article, fall back to the whole body.
  const content = article?.content ?? document.body?.innerHTML ?? '';
  const fragment = parseHTML(`<!doctype html><html><body>${content}</body></html>`).document;
  return {
    title: article?.title || title,
    byline: article?.byline ?? null,
    excerpt: article?.excerpt ?? null,
    content:
      format === 'html'
        ? content.trim()
        : format === 'text'
          ? tidyText(article?.textContent ?? fragment.body?.textContent ?? '')
          : turndown.turndown(content).trim(),
    links: collectLinks(fragment, url),
  };
}
