/**
 * sharp as the server uses it (src/libvips.ts): one libvips thread per image, whatever sharp's own
 * default would be (every core where jemalloc is preloaded, as in the image), and every module of
 * src/ taking sharp from there, so that the setting holds before any image is read.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { expect, it, vi } from 'vitest';

const src = fileURLToPath(new URL('../../src', import.meta.url));

it('runs libvips on one thread per image and keeps no operation cache', async () => {
  sharp.concurrency(4);
  sharp.cache(true);
  vi.resetModules();
  const { default: configured } = await import('../../src/libvips.js');
  expect(configured).toBe(sharp);
  expect(sharp.concurrency()).toBe(1);
  expect(sharp.cache()).toMatchObject({ memory: { max: 0 }, items: { max: 0 }, files: { max: 0 } });
});

it('is where every module of src/ takes sharp from', () => {
  const files = readdirSync(src, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
  const direct = files.filter((file) =>
    // A type-only import of 'sharp' runs nothing; any other one would load it unconfigured.
    /^import (?!type )[^;]*from 'sharp';/m.test(readFileSync(join(src, file), 'utf8')),
  );
  expect(direct.map((file) => relative(src, join(src, file)))).toEqual(['libvips.ts']);
});
