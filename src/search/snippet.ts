/**
 * Snippets: the window of a text with the most query terms in it, cut at word boundaries.
 */

const wordPattern = /[\p{L}\p{N}]+/gu;

/** The distinct lower-cased words of a query longer than two letters. */
export function queryTerms(query: string): string[] {
  return [...new Set((query.toLowerCase().match(wordPattern) ?? []).filter((word) => word.length > 2))];
}

export function bestSnippet(text: string, query: string, maxWords = 40): string {
  const words = text.split(/\s+/).filter(Boolean);
  if (words.length <= maxWords) return words.join(' ');
  // A short prefix stands in for a stem: "sleeping" finds "sleep", "otters" finds "otter".
  const terms = queryTerms(query).map((term) => (term.length > 5 ? term.slice(0, 5) : term));
  const hits = words.map((word) => {
    const lower = word.toLowerCase();
    return terms.some((term) => lower.includes(term)) ? 1 : 0;
  });
  let best = 0;
  let bestStart = 0;
  let current = 0;
  for (let i = 0; i < words.length; i++) {
    current += hits[i]!;
    if (i >= maxWords) current -= hits[i - maxWords]!;
    if (i >= maxWords - 1 && current > best) {
      best = current;
      bestStart = i - maxWords + 1;
    }
  }
  const slice = words.slice(bestStart, bestStart + maxWords).join(' ');
  return `${bestStart > 0 ? '… ' : ''}${slice}${bestStart + maxWords < words.length ? ' …' : ''}`;
}
