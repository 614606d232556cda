/**
 * Reads documents for the local index from files: folders of .md / .txt / .html files, and JSONL
 * files (optionally gzip-compressed) with one document per line, BEIR's corpus layout included
 * (`_id`, `title`, `text`, `metadata`).
 */
import { createReadStream } from 'node:fs';
import { readdir, readFile, stat } from 'node:fs/promises';
import { basename, extname, relative, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { createGunzip } from 'node:zlib';
import { invalid } from '../../errors.js';
import type { SearchImage } from '../types.js';
import type { IndexDocument } from './document-index.js';
import { extractHtml, parseDate, parseLanguageTag } from './html.js';

export const documentExtensions = ['.md', '.markdown', '.txt', '.html', '.htm'];
export const jsonlExtensions = ['.jsonl', '.ndjson', '.jsonl.gz', '.ndjson.gz'];

/** A document as a client or a JSONL line gives it; fields have the common spellings. */
export interface DocumentInput {
  id?: unknown;
  _id?: unknown;
  url?: unknown;
  title?: unknown;
  text?: unknown;
  content?: unknown;
  body?: unknown;
  source?: unknown;
  language?: unknown;
  lang?: unknown;
  region?: unknown;
  published_date?: unknown;
  publishedDate?: unknown;
  date?: unknown;
  images?: unknown;
  metadata?: unknown;
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' ? value : typeof value === 'number' ? String(value) : undefined;
}

export interface DocumentDefaults {
  /** The key of a document with neither id nor url. */
  key: string;
  /** The url of a document without one, from its key. */
  url: (key: string) => string;
  source: string;
}

/** Turns one document object (an API document, a JSONL line) into an index document. */
export function documentFromInput(input: DocumentInput, defaults: DocumentDefaults, param = 'document'): IndexDocument {
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    throw invalid(param, `${param} must be an object.`);
  const meta = typeof input.metadata === 'object' && input.metadata !== null ? (input.metadata as DocumentInput) : {};
  const body = text(input.text) ?? text(input.content) ?? text(input.body);
  if (body === undefined || body.trim() === '')
    throw invalid(`${param}.text`, `${param}.text is required and must not be empty.`);
  const id = text(input.id) ?? text(input._id);
  const url = text(input.url) ?? text(meta.url);
  const tag = parseLanguageTag(text(input.language) ?? text(input.lang) ?? text(meta.language) ?? text(meta.lang));
  const region = text(input.region) ?? text(meta.region);
  const publishedAt = publishedDateOf(input, param);
  const key = id ?? url ?? defaults.key;
  const page = url ?? defaults.url(key);
  const images = Array.isArray(input.images)
    ? input.images.flatMap((image): SearchImage[] => {
        const src = typeof image === 'string' ? image : text((image as { url?: unknown })?.url);
        return src ? [{ url: src, page_url: page }] : [];
      })
    : undefined;
  return {
    key,
    url: page,
    title: (text(input.title) ?? '').trim(),
    text: body,
    source: text(input.source) ?? defaults.source,
    language: tag.language,
    region: region ? region.toUpperCase() : tag.region,
    publishedAt,
    images,
  };
}

/** A document's publication date in any of its spellings (epoch ms); a value that is no date is refused. */
export function publishedDateOf(input: DocumentInput, param: string): number | undefined {
  const meta = typeof input.metadata === 'object' && input.metadata !== null ? (input.metadata as DocumentInput) : {};
  const raw =
    input.published_date ?? input.publishedDate ?? input.date ?? meta.published_date ?? meta.publishedDate ?? meta.date;
  const publishedAt = parseDate(raw);
  if (raw !== undefined && raw !== null && raw !== '' && publishedAt === undefined) {
    throw invalid(
      `${param}.published_date`,
      `${param}.published_date "${JSON.stringify(raw)}" is not a date (use ISO 8601).`,
    );
  }
  return publishedAt;
}

/** Splits a Markdown file's front matter (`key: value` lines between `---` fences) from its body. */
function frontMatter(content: string): { fields: Record<string, string>; body: string } {
  const match = /^---\r?\n([\s\S]*?)\r?\n---\r?\n?/.exec(content);
  if (!match) return { fields: {}, body: content };
  const fields: Record<string, string> = {};
  for (const line of match[1]!.split(/\r?\n/)) {
    const pair = /^([A-Za-z_][\w-]*)\s*:\s*(.*)$/.exec(line);
    if (pair) fields[pair[1]!.toLowerCase()] = pair[2]!.trim().replace(/^(['"])(.*)\1$/, '$2');
  }
  return { fields, body: content.slice(match[0].length) };
}

export async function readDocumentFile(path: string, source: string): Promise<IndexDocument | undefined> {
  const content = await readFile(path, 'utf8');
  const url = pathToFileURL(path).href;
  const ext = extname(path).toLowerCase();
  const name = basename(path, extname(path));
  if (ext === '.html' || ext === '.htm') {
    const page = extractHtml(content, url);
    if (!page.text) return undefined;
    return {
      key: url,
      url,
      title: page.title || name,
      text: page.text,
      source,
      language: page.language,
      region: page.region,
      publishedAt: page.publishedAt,
      images: page.images,
    };
  }
  const { fields, body } = ext === '.txt' ? { fields: {}, body: content } : frontMatter(content);
  if (body.trim() === '') return undefined;
  const heading = ext === '.txt' ? undefined : /^#\s+(.+)$/m.exec(body)?.[1]?.trim();
  const tag = parseLanguageTag(fields.language ?? fields.lang);
  return {
    key: url,
    url: fields.url ?? url,
    title: fields.title ?? heading ?? name,
    text: body,
    source,
    language: tag.language,
    region: fields.region?.toUpperCase() ?? tag.region,
    publishedAt: parseDate(fields.date ?? fields.published ?? fields.published_date),
  };
}

async function* readJsonl(path: string, source: string): AsyncGenerator<IndexDocument> {
  const stream = path.endsWith('.gz') ? createReadStream(path).pipe(createGunzip()) : createReadStream(path);
  const lines = createInterface({ input: stream, crlfDelay: Infinity });
  const fileUrl = pathToFileURL(path).href;
  let number = 0;
  for await (const line of lines) {
    number++;
    if (line.trim() === '') continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      throw invalid('file', `${source} line ${number} is not JSON.`);
    }
    const defaults = {
      key: `${fileUrl}#${number}`,
      url: (key: string) => `${fileUrl}#${encodeURIComponent(key)}`,
      source,
    };
    yield documentFromInput(parsed as DocumentInput, defaults, `${source} line ${number}`);
  }
}

function isJsonl(path: string): boolean {
  const lower = path.toLowerCase();
  return jsonlExtensions.some((ext) => lower.endsWith(ext));
}

/** The files under a folder, depth first, in name order; hidden ones left out. */
export async function* walk(dir: string): AsyncGenerator<string> {
  const entries = await readdir(dir, { withFileTypes: true });
  entries.sort((a, b) => a.name.localeCompare(b.name));
  for (const entry of entries) {
    if (entry.name.startsWith('.')) continue;
    const path = resolve(dir, entry.name);
    if (entry.isDirectory()) yield* walk(path);
    else if (entry.isFile()) yield path;
  }
}

/**
 * Documents from files and folders, in a stable order. Files of other types in a folder are
 * skipped; a file named explicitly must be of a known type.
 */
export async function* readSources(paths: readonly string[]): AsyncGenerator<IndexDocument> {
  for (const given of paths) {
    const root = resolve(given);
    const info = await stat(root).catch(() => undefined);
    if (!info) throw invalid('path', `${given} does not exist.`);
    if (info.isFile()) {
      if (isJsonl(root)) yield* readJsonl(root, basename(root));
      else if (documentExtensions.includes(extname(root).toLowerCase())) {
        const doc = await readDocumentFile(root, basename(root));
        if (doc) yield doc;
      } else
        throw invalid('path', `${given}: index .md, .txt, .html files, folders of them, or .jsonl (.jsonl.gz) files.`);
      continue;
    }
    for await (const path of walk(root)) {
      const source = relative(root, path);
      if (isJsonl(path)) yield* readJsonl(path, source);
      else if (documentExtensions.includes(extname(path).toLowerCase())) {
        const doc = await readDocumentFile(path, source);
        if (doc) yield doc;
      }
    }
  }
}
