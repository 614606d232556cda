/**
 * The reader's worker threads (runs the built worker script: npm run build first): pages wait for a
 * thread, a client that goes away frees its thread at once, and a thread ended is replaced.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { PageParser } from '../../src/search/reader/page-parser.js';

const page = (title: string, body: string) =>
  `<!doctype html><html><head><title>${title}</title></head><body><article>${body}</article></body></html>`;
const paragraph =
  '<p>A paragraph long enough for Readability to take this for the article it is, with a few words more.</p>';
const crowded = page('crowded', '<div><p>a b c</p></div>'.repeat(100_000));

describe('PageParser', () => {
  const parser = new PageParser({ threads: 1, timeoutMs: 60_000 });
  afterAll(() => parser.close());

  it('converts pages one after another on one thread', async () => {
    const [first, second] = await Promise.all([
      parser.convert({ html: page('First', paragraph), url: 'http://pages.test/', format: 'markdown' }),
      parser.convert({ html: page('Second', paragraph), url: 'http://pages.test/', format: 'text' }),
    ]);
    expect(first.title).toBe('First');
    expect(first.content).toContain('A paragraph long enough');
    expect(second.title).toBe('Second');
    expect(parser.replaced).toBe(0);
  });

  it('ends the thread of a page whose client went away, and reads the next page on a new one', async () => {
    const controller = new AbortController();
    const reading = parser.convert({ html: crowded, url: 'http://pages.test/', format: 'markdown' }, controller.signal);
    setTimeout(() => controller.abort(), 100);
    await expect(reading).rejects.toMatchObject({ code: 'client_closed' });
    expect(parser.replaced).toBe(1);
    expect(
      (await parser.convert({ html: page('Next', paragraph), url: 'http://pages.test/', format: 'markdown' })).title,
    ).toBe('Next');
  });

  it('refuses pages once closed', async () => {
    const closing = new PageParser({ threads: 1, timeoutMs: 60_000 });
    const waiting = closing
      .convert({ html: crowded, url: 'http://pages.test/', format: 'markdown' })
      .catch((error: unknown) => error);
    await closing.close();
    expect(await waiting).toMatchObject({ code: 'shutting_down' });
    await expect(
      closing.convert({ html: page('Late', paragraph), url: 'http://pages.test/', format: 'html' }),
    ).rejects.toMatchObject({ code: 'shutting_down' });
  });
});
