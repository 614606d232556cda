/**
 * Validates a search request and brings its tolerant fields (freshness spellings, area tags) to
 * one canonical form, so providers see only clean values.
 */
import { invalid } from '../errors.js';
import type { Area, Freshness, ResultFormat, SearchRequest } from './types.js';

export interface RawSearchRequest {
  query?: unknown;
  area?: unknown;
  freshness?: unknown;
  includeImages?: unknown;
  page?: unknown;
  count?: unknown;
  format?: unknown;
}

export const searchLimits = { maxQueryChars: 2000, maxCount: 50, maxPage: 20 } as const;

export const freshnessValues: readonly Freshness[] = ['oneDay', 'oneWeek', 'oneMonth', 'oneYear', 'noLimit'];

/** Common spellings, compared without case, spaces, dashes or underscores. */
const freshnessAliases: Record<string, Freshness> = {
  oneday: 'oneDay',
  day: 'oneDay',
  '1d': 'oneDay',
  '24h': 'oneDay',
  pastday: 'oneDay',
  lastday: 'oneDay',
  today: 'oneDay',
  oneweek: 'oneWeek',
  week: 'oneWeek',
  '1w': 'oneWeek',
  '7d': 'oneWeek',
  pastweek: 'oneWeek',
  lastweek: 'oneWeek',
  onemonth: 'oneMonth',
  month: 'oneMonth',
  '1m': 'oneMonth',
  '30d': 'oneMonth',
  pastmonth: 'oneMonth',
  lastmonth: 'oneMonth',
  oneyear: 'oneYear',
  year: 'oneYear',
  '1y': 'oneYear',
  '365d': 'oneYear',
  pastyear: 'oneYear',
  lastyear: 'oneYear',
  nolimit: 'noLimit',
  none: 'noLimit',
  any: 'noLimit',
  anytime: 'noLimit',
  all: 'noLimit',
  alltime: 'noLimit',
  unlimited: 'noLimit',
};

/** How far back each freshness reaches, in milliseconds. */
export const freshnessWindowMs: Record<Freshness, number> = {
  oneDay: 86_400_000,
  oneWeek: 7 * 86_400_000,
  oneMonth: 31 * 86_400_000,
  oneYear: 366 * 86_400_000,
  noLimit: Number.POSITIVE_INFINITY,
};

export function parseFreshness(value: unknown): Freshness {
  if (value === undefined || value === null || value === '') return 'noLimit';
  if (typeof value !== 'string')
    throw invalid('freshness', `freshness must be a string, one of ${freshnessValues.join(', ')}.`);
  const key = value.toLowerCase().replace(/[\s_-]+/g, '');
  // Own names only: "constructor" would otherwise be a freshness (a function, and a NaN date filter).
  const freshness = Object.hasOwn(freshnessAliases, key) ? freshnessAliases[key] : undefined;
  if (!freshness)
    throw invalid('freshness', `freshness "${value}" is not known; use one of ${freshnessValues.join(', ')}.`);
  return freshness;
}

/** Values of `area` that mean "anywhere". */
const worldwide = new Set(['global', 'worldwide', 'world', 'all', 'any', 'international', 'intl']);

export function parseArea(value: unknown): Area {
  if (value === undefined || value === null || value === '') return { tag: 'global' };
  if (typeof value !== 'string')
    throw invalid('area', 'area must be a string: "global" or a language tag such as "en" or "en-US".');
  const text = value.trim();
  if (worldwide.has(text.toLowerCase())) return { tag: 'global' };
  const match = /^([a-z]{2,3})(?:[-_]([a-z]{2}|\d{3}))?$/i.exec(text);
  if (!match) throw invalid('area', `area "${value}" is not "global" or a language tag such as "en" or "en-US".`);
  const language = match[1]!.toLowerCase();
  const region = match[2]?.toUpperCase();
  return region ? { tag: `${language}-${region}`, language, region } : { tag: language, language };
}

function integer(param: string, value: unknown, fallback: number, min: number, max: number): number {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value)) throw invalid(param, `${param} must be an integer.`);
  if (value < min || value > max) throw invalid(param, `${param} must be between ${min} and ${max}; got ${value}.`);
  return value;
}

export function normaliseSearchRequest(raw: RawSearchRequest): SearchRequest {
  if (typeof raw.query !== 'string') throw invalid('query', 'query is required and must be a string.');
  const query = raw.query.trim();
  if (query.length === 0) throw invalid('query', 'query must not be empty.');
  if (query.length > searchLimits.maxQueryChars)
    throw invalid('query', `query has ${query.length} characters; at most ${searchLimits.maxQueryChars} are accepted.`);
  if (raw.includeImages !== undefined && raw.includeImages !== null && typeof raw.includeImages !== 'boolean') {
    throw invalid('includeImages', 'includeImages must be true or false.');
  }
  let format: ResultFormat = 'json';
  if (raw.format !== undefined && raw.format !== null) {
    const text = typeof raw.format === 'string' ? raw.format.toLowerCase() : '';
    if (text === 'json') format = 'json';
    else if (text === 'markdown' || text === 'md') format = 'markdown';
    else throw invalid('format', 'format must be "json" or "markdown".');
  }
  return {
    query,
    area: parseArea(raw.area),
    freshness: parseFreshness(raw.freshness),
    includeImages: raw.includeImages === true,
    page: integer('page', raw.page, 1, 1, searchLimits.maxPage),
    count: integer('count', raw.count, 10, 1, searchLimits.maxCount),
    format,
  };
}
