/**
 * The layering of ARCHITECTURE.md over src/'s import graph: http -> core -> engine -> worker, each
 * importing only itself and the layer right below; side modules import side modules only; the
 * entry points (main.ts, cli/) compose everything and nothing but cli/ imports them.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const src = fileURLToPath(new URL('../../src', import.meta.url));
const layers = ['worker', 'engine', 'core', 'http'];
const side = ['config', 'errors', 'abort', 'duration', 'version', 'v8-flags', 'devices', 'models', 'text', 'vectors', 'onnx', 'quantize'];
const entries = ['main', 'cli'];
const folderOf = (file: string) => relative(src, file).split('/')[0]!.replace(/\.[jt]s$/, '');

function allowed(from: string, to: string): boolean {
  if (from === to || entries.includes(from)) return true;
  if (side.includes(to)) return true;
  if (side.includes(from) || entries.includes(to)) return false;
  return layers.indexOf(to) === layers.indexOf(from) - 1;
}

it('imports in src/ run down one layer at a time', () => {
  const files = readdirSync(src, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts')).map((f) => join(src, f));
  expect(files.length).toBeGreaterThan(50);
  const wrong: string[] = [];
  for (const file of files) {
    const from = folderOf(file);
    expect([...layers, ...side, ...entries], `${relative(src, file)} is in no layer`).toContain(from);
    for (const [, specifier] of readFileSync(file, 'utf8').matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)) {
      const to = folderOf(resolve(dirname(file), specifier!));
      if (!allowed(from, to)) wrong.push(`${relative(src, file)} imports ${specifier} (${from} -> ${to})`);
    }
  }
  expect(wrong).toEqual([]);
});
