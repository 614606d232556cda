/**
 * Whitespace runs in a page are cut before turndown's and the text format's regexes see them (those
 * take time quadratic in a run's length), however the page spells the run: plain spaces, entities,
 * spread over many elements, line breaks.
 */
import { describe, expect, it } from 'vitest';
import { convertPage } from '../../src/search/reader/convert.js';
import { capWhitespaceRuns, maxWhitespaceRun } from '../../src/search/reader/whitespace.js';

const longestRun = (text: string) =>
  (text.match(/\s+/g) ?? []).reduce((longest, run) => Math.max(longest, run.length), 0);

describe('capWhitespaceRuns', () => {
  it('cuts runs over the cap and leaves shorter ones', () => {
    expect(capWhitespaceRuns(`a${' '.repeat(10)}b\t\tc`, 0, 4)).toEqual({ text: 'a    b\t\tc', trailing: 0 });
  });
  it('continues a run carried from the text before, and reports the run it ends with', () => {
    expect(capWhitespaceRuns('   x  ', 2, 4)).toEqual({ text: '  x  ', trailing: 2 });
    expect(capWhitespaceRuns('      ', 3, 4)).toEqual({ text: ' ', trailing: 4 });
    expect(capWhitespaceRuns('', 3, 4)).toEqual({ text: '', trailing: 3 });
  });
});

const page = (inner: string) =>
  `<!doctype html><html><head><title>t</title></head><body><article><h1>Runs</h1>
<p>A paragraph long enough for Readability to take this for the article it is, with a few words more to be sure of it.</p>
${inner}</article></body></html>`;

describe('convertPage', () => {
  it.each([
    ['spaces in a <pre>', `<pre>a${' '.repeat(100_000)}b</pre>`],
    ['tabs and newlines in a <pre>', `<pre>a${' \t\n'.repeat(30_000)}b</pre>`],
    ['space entities', `<pre>a${'&#32;'.repeat(20_000)}b</pre>`],
    ['no-break spaces', `<p>a${'&nbsp;'.repeat(20_000)}b</p>`],
    ['no-break spaces, one per element', `<pre>a${'<b>&nbsp;</b>'.repeat(3_000)}b</pre>`],
    ['line breaks', `<p>a${'<br>'.repeat(3_000)}b</p>`],
  ])('cuts a long run of %s', (_name, inner) => {
    for (const format of ['markdown', 'text', 'html'] as const) {
      const { content } = convertPage(page(inner), 'http://pages.test/', format);
      expect(content).toMatch(/a[\s\S]*b/);
      // The cap, and the few characters markdown adds around a block.
      expect(longestRun(content)).toBeLessThanOrEqual(maxWhitespaceRun + 4);
    }
  });

  it('keeps the whitespace a page means: indentation in code, line breaks', () => {
    const code = 'def f():\n        return 1\n';
    const { content } = convertPage(
      page(`<pre><code>${code}</code></pre><p>one<br>two</p>`),
      'http://pages.test/',
      'markdown',
    );
    expect(content).toContain('```\ndef f():\n        return 1\n```');
    expect(content).toContain('one  \ntwo');
  });

  it('writes plain text without trailing spaces and with one blank line at most', () => {
    const { content } = convertPage(page('<pre>x   \n\n\n\n\ny \t\nz</pre>'), 'http://pages.test/', 'text');
    expect(content).toContain('x\n\ny\nz');
  });
});
