/**
 * The playground page, clicked through in headless Chromium against a real server: similarity,
 * rerank, web search over the local index, an image edit on a tiny generated image model, errors,
 * and a screenshot that must show a rendered page.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from '../../src/main.js';
import { writeTinyImageModels } from '../fixtures/tiny-image-model.js';
import { auth, startServer, testKey } from '../helpers/server.js';
import { missing } from '../helpers/resources.js';

const executablePath = '/usr/bin/chromium';
const hasChromium = !missing(
  existsSync(executablePath),
  `needs Chromium at ${executablePath}: apt-get install -y chromium`,
);
const launchArgs = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

describe.skipIf(!hasChromium)(
  `playground (${hasChromium ? 'headless Chromium' : 'needs Chromium at /usr/bin/chromium: apt-get install -y chromium'})`,
  () => {
    let server: Server;
    let url: string;
    let browser: Browser;
    let imageDir: string;

    beforeAll(async () => {
      imageDir = await mkdtemp(join(tmpdir(), 'onnx-gateway-playground-'));
      await writeTinyImageModels(imageDir);
      server = await startServer({
        workers: 1,
        imageModels: ['tiny-upscaler'],
        imageModelsDir: imageDir,
        imageWorkers: 1,
        imageIntraOpThreads: 1,
        indexWriteKeys: [testKey],
      });
      const indexed = await server.app.inject({
        method: 'POST',
        url: '/v1/web-search/index/documents',
        headers: auth,
        payload: {
          documents: [
            {
              id: 'cats',
              title: 'Domestic cats',
              text: 'Cats are small carnivorous mammals kept as pets. A cat sleeps most of the day.',
              url: 'https://example.org/cats',
            },
            {
              id: 'trucks',
              title: 'Trucks',
              text: 'A truck is a motor vehicle designed to transport cargo.',
              url: 'https://example.org/trucks',
            },
          ],
        },
      });
      expect(indexed.statusCode).toBe(200);
      url = await server.app.listen({ host: '127.0.0.1', port: 0 });
      browser = await chromium.launch({ executablePath, args: launchArgs });
    });
    afterAll(async () => {
      await browser?.close();
      await server?.close();
      if (imageDir) await rm(imageDir, { recursive: true, force: true });
    });

    /** A colour gradient, so the edited image shows something in the screenshot. */
    async function gradientPng(width: number, height: number): Promise<Buffer> {
      const raw = Buffer.alloc(width * height * 3);
      for (let y = 0; y < height; y++) {
        for (let x = 0; x < width; x++)
          raw.set([Math.round((255 * x) / width), Math.round((255 * y) / height), 160], (y * width + x) * 3);
      }
      return sharp(raw, { raw: { width, height, channels: 3 } })
        .png()
        .toBuffer();
    }

    /** Opens the page with a key typed in, once the model pickers are filled. */
    async function open(key: string): Promise<Page> {
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      await page.goto(`${url}/`);
      await page.fill('#key', key);
      await page.dispatchEvent('#key', 'change');
      return page;
    }

    it('is served at / without a key, with its assets, and hidden from the OpenAPI document', async () => {
      const html = await server.app.inject({ method: 'GET', url: '/' });
      expect(html.statusCode).toBe(200);
      expect(html.headers['content-type']).toMatch(/^text\/html/);
      expect(html.body).toContain('<script src="/playground/app.js">');
      for (const [path, type] of [
        ['/playground/app.js', /^text\/javascript/],
        ['/playground/style.css', /^text\/css/],
      ] as const) {
        const asset = await server.app.inject({ method: 'GET', url: path });
        expect(asset.statusCode).toBe(200);
        expect(asset.headers['content-type']).toMatch(type);
      }
      const openapi = (await server.app.inject({ method: 'GET', url: '/openapi.json' })).json<{
        paths: Record<string, unknown>;
      }>();
      expect(Object.keys(openapi.paths)).not.toContain('/');
      expect(Object.keys(openapi.paths).some((p) => p.startsWith('/playground'))).toBe(false);
    });

    it('compares texts, reranks, searches and edits an image, and renders a real page', async () => {
      const page = await open(testKey);
      await page.waitForFunction(`document.querySelector('#embed-model').value === 'tiny-embedder'`);
      expect(await page.inputValue('#rerank-model')).toBe('tiny-reranker');
      // The key outlives the page.
      expect(await page.evaluate(`localStorage.getItem('onnx-gateway-key')`)).toBe(testKey);

      await page.fill('#texts', 'first text\nsecond text\nsomething else entirely\n');
      await page.click('#embed-run');
      await page.waitForSelector('#embed-out table');
      const rows = page.locator('#embed-out tbody tr');
      const cells = await Promise.all(
        Array.from({ length: await rows.count() }, (_, i) => rows.nth(i).locator('td').allTextContents()),
      );
      expect(cells).toHaveLength(3);
      cells.forEach((row, i) => {
        expect(row).toHaveLength(3);
        expect(row[i]).toBe('1.000');
        row.forEach((value, j) => {
          expect(Number(value)).toBeLessThanOrEqual(1);
          expect(value).toBe(cells[j]![i]); // cosine is symmetric
        });
      });
      expect(cells.flat().some((value) => value !== '1.000')).toBe(true);
      expect(await page.textContent('#embed-meta')).toMatch(/tiny-embedder · 3 texts · \d+ dimensions/);

      await page.click('#rerank-run');
      await page.waitForSelector('#rerank-out li');
      const scores = (await page.locator('#rerank-out li .score').allTextContents()).map(Number);
      expect(scores).toHaveLength(3);
      expect(scores).toEqual([...scores].sort((x, y) => y - x));
      expect((await page.locator('#rerank-out li .doc').allTextContents()).sort()).toEqual([
        'A dog barked at the mail carrier.',
        'Interest rates were raised by the central bank.',
        'The cat is asleep on the sofa.',
      ]);

      await page.fill('#search-query', 'cats pets');
      await page.click('#search-run');
      await page.waitForSelector('#search-out li .title');
      // The tiny test reranker orders arbitrarily: check what is shown, not the order.
      const cats = page.locator('#search-out li .title a', { hasText: 'Domestic cats' });
      expect(await cats.getAttribute('href')).toBe('https://example.org/cats');
      expect(await page.locator('#search-out li .url').first().textContent()).toMatch(
        /^https:\/\/example\.org\/\w+ · api$/,
      );
      expect(await page.textContent('#search-meta')).toMatch(/^local · \d+ results? · /);

      await page.setInputFiles('#image-file', {
        name: 'gradient.png',
        mimeType: 'image/png',
        buffer: await gradientPng(40, 30),
      });
      await page.fill('#image-prompt', 'upscale');
      await page.click('#image-run');
      await page.waitForSelector('#image-out img');
      await page.waitForFunction(`document.querySelector('#image-out img').complete`);
      const size = await page.evaluate(
        `(({ naturalWidth, naturalHeight }) => [naturalWidth, naturalHeight])(document.querySelector('#image-out img'))`,
      );
      expect(size).toEqual([80, 60]);
      expect(await page.textContent('#image-out figcaption')).toMatch(/tiny-upscaler/);

      const screenshot = await page.screenshot({ fullPage: true });
      const { width, height, format } = await sharp(screenshot).metadata();
      expect(format).toBe('png');
      expect(width).toBe(1280);
      expect(height).toBeGreaterThan(600);
      expect(screenshot.length).toBeGreaterThan(30_000);
      // A blank or single-colour page has no spread in any channel.
      const stats = await sharp(screenshot).stats();
      expect(Math.max(...stats.channels.map((c) => c.stdev))).toBeGreaterThan(20);
      await page.close();
    });

    /** Waits until the panel's error box says what is expected (it may hold an earlier error first). */
    async function errorIn(page: Page, selector: string, expected: string): Promise<string> {
      await page.locator(`${selector} .error`, { hasText: expected }).waitFor();
      return (await page.textContent(`${selector} .error`)) ?? '';
    }

    it("shows the server's error messages plainly", async () => {
      const page = await open('wrong-key');
      expect(await errorIn(page, '#embed-out', 'HTTP 401')).toMatch(/API key/);
      expect(await page.textContent('#embed-model')).toBe('(models unavailable)');

      await page.fill('#key', testKey);
      await page.dispatchEvent('#key', 'change');
      await page.click('#image-run');
      expect(await errorIn(page, '#image-out', 'Choose an image first.')).toBe('Choose an image first.');
      // A prompt that asks for no pipeline the server has: the 400's message is shown as it is.
      const png = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#ffffff' } })
        .png()
        .toBuffer();
      await page.setInputFiles('#image-file', { name: 'white.png', mimeType: 'image/png', buffer: png });
      await page.fill('#image-prompt', 'make it purple');
      await page.click('#image-run');
      expect(await errorIn(page, '#image-out', 'HTTP 400')).toMatch(
        /^The prompt asks for nothing this server can do\./,
      );
      await page.close();
    });
  },
);
