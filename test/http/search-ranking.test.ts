/**
 * The pure parts of search: request normalisation, rank fusion, snippets and the Markdown
 * rendering.
 */
import { describe, expect, it } from 'vitest';
import { normalisedScoreMix, reciprocalRankFusion } from '../../src/search/fusion.js';
import { queryTerms } from '../../src/search/index/bm25.js';
import { renderMarkdown } from '../../src/search/markdown.js';
import { normaliseSearchRequest, parseArea, parseFreshness } from '../../src/search/request.js';
import { bestSnippet } from '../../src/search/snippet.js';

describe('search requests', () => {
  it('fill defaults', () => {
    expect(normaliseSearchRequest({ query: '  otters ' })).toEqual({
      query: 'otters',
      area: { tag: 'global' },
      freshness: 'noLimit',
      includeImages: false,
      page: 1,
      count: 10,
      format: 'json',
    });
  });
  it.each([
    ['oneDay', 'oneDay'],
    ['day', 'oneDay'],
    ['24h', 'oneDay'],
    ['ONE_DAY', 'oneDay'],
    ['past week', 'oneWeek'],
    ['7d', 'oneWeek'],
    ['one-month', 'oneMonth'],
    ['year', 'oneYear'],
    ['noLimit', 'noLimit'],
    ['none', 'noLimit'],
    ['', 'noLimit'],
  ])('read freshness %j as %s', (given, expected) => {
    expect(parseFreshness(given)).toBe(expected);
  });
  it.each(['constructor', 'toString', '__proto__', 'hasOwnProperty'])(
    'refuse freshness %j, a name every object has',
    (given) => {
      expect(() => parseFreshness(given)).toThrow(
        expect.objectContaining({ code: 'invalid_request', param: 'freshness' }),
      );
    },
  );
  it.each([
    ['global', { tag: 'global' }],
    ['Worldwide', { tag: 'global' }],
    ['en', { tag: 'en', language: 'en' }],
    ['pt_br', { tag: 'pt-BR', language: 'pt', region: 'BR' }],
    ['es-419', { tag: 'es-419', language: 'es', region: '419' }],
  ])('read area %j', (given, expected) => {
    expect(parseArea(given)).toEqual(expected);
  });
  it('accept "md" for markdown', () => {
    expect(normaliseSearchRequest({ query: 'x', format: 'md' }).format).toBe('markdown');
  });
});

describe('rank fusion', () => {
  const bm25 = [
    { id: 1, score: 12 },
    { id: 2, score: 8 },
    { id: 3, score: 1 },
  ];
  const dense = [
    { id: 3, score: 0.9 },
    { id: 1, score: 0.8 },
    { id: 4, score: 0.1 },
  ];
  it('by reciprocal rank favours documents both lists rank well', () => {
    const fused = reciprocalRankFusion([bm25, dense]);
    expect(fused.map((s) => s.id)).toEqual([1, 3, 2, 4]);
    expect(fused[0]!.score).toBeCloseTo(1 / 61 + 1 / 62, 12);
  });
  it('by normalised score mix uses the score gaps', () => {
    const fused = normalisedScoreMix([bm25, dense]);
    expect(fused.map((s) => s.id)).toEqual([1, 3, 2, 4]);
    expect(fused[0]!.score).toBeCloseTo(0.5 * 1 + 0.5 * (0.7 / 0.8), 12);
    expect(fused.at(-1)!.score).toBe(0);
    expect(normalisedScoreMix([bm25, []]).map((s) => s.id)).toEqual([1, 2, 3]);
  });
});

describe('BM25 queries', () => {
  it('stem the words, count repeats and drop stopwords while others remain', () => {
    expect(queryTerms('The cats AND "cat" NEAR(x) connecting')).toEqual(
      new Map([
        ['cat', 2],
        ['near', 1],
        ['x', 1],
        ['connect', 1],
      ]),
    );
    expect(queryTerms('the of')).toEqual(
      new Map([
        ['the', 1],
        ['of', 1],
      ]),
    );
    expect(queryTerms('?!').size).toBe(0);
  });
});

describe('snippets', () => {
  it('pick the window with the most query words', () => {
    const text = `${'filler '.repeat(100)}sea otters hold hands while they sleep ${'filler '.repeat(100)}`;
    const snippet = bestSnippet(text, 'otters sleeping', 10);
    expect(snippet).toContain('otters hold hands while they sleep');
    expect(snippet.startsWith('… ')).toBe(true);
    expect(snippet.endsWith(' …')).toBe(true);
    expect(bestSnippet('short text', 'x')).toBe('short text');
  });
});

describe('markdown', () => {
  it('numbers linked results from the page start and escapes markup', () => {
    const markdown = renderMarkdown(
      'q',
      {
        results: [
          {
            title: 'A [b] *c*',
            url: 'https://example.org/a (1)',
            snippet: 'text',
            score: 0.5,
            source: 'wiki',
            published_date: '2024-01-02T00:00:00.000Z',
          },
        ],
        images: [{ url: 'https://example.org/i.png', title: 'pic' }],
      },
      11,
    );
    expect(markdown).toContain('## 11. [A \\[b\\] \\*c\\*](https://example.org/a%20%281%29)');
    expect(markdown).toContain('*wiki · 2024-01-02 · score 0.500*');
    expect(markdown).toContain('- ![pic](https://example.org/i.png)');
    expect(renderMarkdown('q', { results: [] })).toContain('No results.');
    expect(
      renderMarkdown('q', { results: [{ title: 't', url: 'u', snippet: '# not a heading', score: 1, source: 's' }] }),
    ).toContain('\\# not a heading');
  });
});
