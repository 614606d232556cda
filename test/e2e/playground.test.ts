/**
 * The playground page, clicked through in headless Chromium against a real server.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from '../../src/server.js';
import { startServer, testKey } from '../helpers/server.js';

const executablePath = '/usr/bin/chromium';
const hasChromium = existsSync(executablePath);

describe.skipIf(!hasChromium)(`playground (${hasChromium ? 'headless Chromium' : 'needs Chromium: apt-get install -y chromium'})`, () => {
  let server: Server;
  let url: string;
  let browser: Browser;
  beforeAll(async () => {
    server = await startServer({ workers: 1 });
    url = await server.app.listen({ host: '127.0.0.1', port: 0 });
    browser = await chromium.launch({
      executablePath,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it('compares texts, reranks documents and renders a real page', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(`${url}/`);
    await page.fill('#key', testKey);
    await page.dispatchEvent('#key', 'change');
    await page.waitForSelector('#embed-model option', { state: 'attached' });
    expect(await page.inputValue('#embed-model')).toBe('tiny-embedder');

    await page.fill('#texts', 'first text\nsecond text\nsomething else entirely');
    await page.click('#embed-run');
    await page.waitForSelector('#embed-out table');
    const cells = await page.$$eval('#embed-out tr', (rows) => rows.slice(1).map((row) => Array.from(row.querySelectorAll('td')).map((td) => (td as { textContent: string | null }).textContent)));
    expect(cells).toHaveLength(3);
    cells.forEach((row, i) => {
      expect(row).toHaveLength(3);
      expect(row[i]).toBe('1.000');
    });

    await page.click('#rerank-run');
    await page.waitForSelector('#rerank-out li');
    const ranked = await page.$$eval('#rerank-out li .score', (spans) => spans.map((s) => Number(s.textContent)));
    expect(ranked).toHaveLength(3);
    expect([...ranked].sort((a, b) => b - a)).toEqual(ranked);

    const png = await page.screenshot({ fullPage: true });
    const { width, height } = await sharp(png).metadata();
    expect(width).toBeGreaterThan(400);
    expect(height).toBeGreaterThan(300);
    const stats = await sharp(png).stats();
    expect(Math.max(...stats.channels.map((c) => c.stdev))).toBeGreaterThan(10);
    await page.close();
  });

  it('shows the server\'s error message plainly', async () => {
    const page = await browser.newPage();
    await page.goto(`${url}/`);
    await page.fill('#key', 'wrong-key');
    await page.dispatchEvent('#key', 'change');
    await page.click('#rerank-run');
    await page.waitForSelector('#rerank-out .error');
    expect(await page.textContent('#rerank-out .error')).toMatch(/API key/);
    await page.close();
  });
});
