/**
 * What the index keeps of an HTML page: title, visible text, language, publication date, images.
 */
import * as cheerio from 'cheerio';
import type { SearchImage } from '../types.js';

export interface HtmlDocument {
  title: string;
  text: string;
  language?: string;
  region?: string;
  publishedAt?: number;
  images: SearchImage[];
}

/** Elements whose text is not part of the page's content. */
const noise = 'script, style, noscript, template, svg, iframe, nav, header > nav, footer, form, button';
/** Elements after which a line break belongs, so words of adjacent blocks do not run together. */
const blocks = 'p, div, section, article, li, h1, h2, h3, h4, h5, h6, br, tr, td, th, pre, blockquote, dd, dt';

export function parseLanguageTag(tag: string | undefined): { language?: string; region?: string } {
  const match = tag ? /^([a-z]{2,3})(?:[-_]([a-z]{2}|\d{3}))?/i.exec(tag.trim()) : null;
  if (!match) return {};
  return { language: match[1]!.toLowerCase(), region: match[2]?.toUpperCase() };
}

export function parseDate(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  if (typeof value !== 'string' || value.trim() === '') return undefined;
  const ms = Date.parse(value.trim());
  return Number.isNaN(ms) ? undefined : ms;
}

function resolveUrl(src: string, base: string | undefined): string | undefined {
  try {
    return new URL(src, base).href;
  } catch {
    return undefined;
  }
}

export function extractHtml(html: string, baseUrl?: string): HtmlDocument {
  const $ = cheerio.load(html);
  const title = (
    $('title').first().text() ||
    $('h1').first().text() ||
    $('meta[property="og:title"]').attr('content') ||
    ''
  )
    .replace(/\s+/g, ' ')
    .trim();
  const { language, region } = parseLanguageTag(
    $('html').attr('lang') ?? $('meta[http-equiv="content-language"]').attr('content'),
  );
  const publishedAt = parseDate(
    $('meta[property="article:published_time"]').attr('content') ??
      $('meta[name="date"]').attr('content') ??
      $('meta[name="dcterms.date"]').attr('content') ??
      $('time[datetime]').first().attr('datetime'),
  );
  const images: SearchImage[] = [];
  $('img[src]').each((_, element) => {
    const url = resolveUrl($(element).attr('src')!, baseUrl);
    if (url && !url.startsWith('data:'))
      images.push({ url, title: $(element).attr('alt') || undefined, page_url: baseUrl });
  });
  // cheerio puts every document, fragments too, into html > body.
  const body = $('body');
  body.find(noise).remove();
  body.find(blocks).after('\n');
  const text = body
    .text()
    .split('\n')
    .map((line) => line.replace(/\s+/g, ' ').trim())
    .filter(Boolean)
    .join('\n');
  return { title, text, language, region, publishedAt, images };
}
