/**
 * The LLM-ready rendering of search results (`format: "markdown"`): a numbered list of linked
 * titles with source, date and snippet, then the images.
 */
import type { SearchOutcome } from './types.js';

/** Escapes the characters that would end a link text or start markup (a heading, emphasis, HTML). */
function escapeText(text: string): string {
  return text
    .replace(/([\\[\]*_`<>#])/g, '\\$1')
    .replace(/\s+/g, ' ')
    .trim();
}

function escapeUrl(url: string): string {
  // Parentheses and spaces would end the link target early.
  return url.replace(/[()\s]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`);
}

export function renderMarkdown(query: string, outcome: SearchOutcome, firstRank = 1): string {
  const lines: string[] = [`# Search results: ${escapeText(query)}`, ''];
  if (outcome.results.length === 0) lines.push('No results.', '');
  outcome.results.forEach((result, i) => {
    lines.push(`## ${firstRank + i}. [${escapeText(result.title || result.url)}](${escapeUrl(result.url)})`);
    const facts = [result.source, result.published_date?.slice(0, 10), `score ${result.score.toFixed(3)}`].filter(
      Boolean,
    );
    lines.push(`*${facts.join(' · ')}*`, '');
    if (result.snippet) lines.push(escapeText(result.snippet), '');
  });
  if (outcome.images && outcome.images.length > 0) {
    lines.push('## Images', '');
    for (const image of outcome.images) {
      const alt = escapeText(image.title ?? '');
      lines.push(`- ![${alt}](${escapeUrl(image.url)})${image.page_url ? ` from ${escapeUrl(image.page_url)}` : ''}`);
    }
    lines.push('');
  }
  return lines.join('\n');
}
