/**
 * The docs: README.md stays a first page (at most 15 KB), every docs page has a contents list, every
 * relative link and `#heading` link in them points at something, and every bench table in docs/ is
 * what bench/lib/tables.ts makes from the result file its marker names (`npm run docs`).
 */
import { copyFileSync, existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { benchTable, benchTableSpecs, fillBenchTables } from '../../bench/lib/tables.js';

const pages = readdirSync('docs')
  .filter((f) => f.endsWith('.md'))
  .map((f) => join('docs', f));
const read = (file: string) => readFileSync(file, 'utf8');

/** The text outside fenced code blocks and inline code, where links and headings are. */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
}

/** GitHub's anchor of each heading: lowercased, punctuation but '-' and '_' dropped, spaces to '-'; repeats get -1, -2. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const [, text] of prose(markdown).matchAll(/^#{1,6} (.+)$/gm)) {
    const base = text!
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}_\- ]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

function links(markdown: string): string[] {
  return [...prose(markdown).matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!).filter((href) => !/^[a-z]+:/i.test(href));
}

describe('README.md', () => {
  it('is at most 15,000 bytes', () => {
    expect(Buffer.byteLength(read('README.md'))).toBeLessThanOrEqual(15_000);
  });

  it('starts with the two commands and maps every docs page', () => {
    const readme = read('README.md');
    expect(readme.split('\n').slice(2, 6).join('\n')).toMatch(/^npm ci && npm start .*\nnpm ci && npm test /m);
    for (const page of pages) expect(readme, page).toContain(`](${page})`);
  });
});

describe('docs pages', () => {
  it.each(pages)('%s has a title, a line on what it covers, and a contents list of its sections', (page) => {
    const text = read(page);
    expect(text).toMatch(/^# .+\n\n\S/);
    const [intro, ...sections] = prose(text).split(/^## /m);
    expect(sections.length, 'sections').toBeGreaterThan(0);
    for (const section of sections) {
      const heading = section.split('\n')[0]!;
      const anchor = [...anchors(`## ${heading}`)][0];
      expect(intro, `contents entry for "${heading}"`).toContain(`](#${anchor})`);
    }
  });
});

describe('links', () => {
  it.each(['README.md', 'ARCHITECTURE.md', ...pages])(
    'every relative link in %s points at a file and heading that exist',
    (file) => {
      const broken: string[] = [];
      for (const href of links(read(file))) {
        const [path, anchor] = href.split('#') as [string, string | undefined];
        const target = path === '' ? file : resolve(dirname(file), path);
        if (!existsSync(target)) {
          broken.push(`${href}: no such file`);
          continue;
        }
        if (anchor !== undefined && target.endsWith('.md') && !anchors(read(target)).has(anchor))
          broken.push(`${href}: no such heading`);
      }
      expect(broken).toEqual([]);
    },
  );

  it('finds a link to a missing heading (the checker itself)', () => {
    expect(
      anchors('## Switching from TEI / Cohere / Ollama\n## Metrics, logs, timing\n## Metrics, logs, timing'),
    ).toEqual(new Set(['switching-from-tei--cohere--ollama', 'metrics-logs-timing', 'metrics-logs-timing-1']));
    expect(links('see [a](docs/a.md#b), [c](https://example.org), `[d](e.md)`')).toEqual(['docs/a.md#b']);
  });
});

describe('bench tables', () => {
  it.each(pages)('%s: every bench table is what its result file makes (npm run docs)', (page) => {
    const text = read(page);
    expect(fillBenchTables(text)).toBe(text);
  });

  it('makes every table of docs/performance.md from a result file', () => {
    const text = read('docs/performance.md');
    expect(benchTableSpecs(text).length).toBeGreaterThanOrEqual(8);
    const outside = text.replace(/<!-- bench-table:\S+ -->\n[\s\S]*?<!-- bench-table:end -->/g, '');
    expect(outside.split('\n').filter((line) => line.startsWith('|'))).toEqual([]);
  });

  it('follows the file: a changed result changes the table, and names the file and its command', () => {
    const dir = mkdtempSync(join(tmpdir(), 'onnx-gateway-bench-tables-'));
    const soak = JSON.parse(read('bench/results/soak-latest.json')) as { errors: number; minutes: number };
    writeFileSync(join(dir, 'soak-latest.json'), JSON.stringify({ ...soak, errors: 7, minutes: 3 }));
    const table = benchTable('soak-latest.json:soak', dir);
    expect(table).toContain('| errors (non-2xx or failed requests, failed /health) | 7 |');
    expect(table).toContain('bench/soak.ts --minutes 3 ');
    expect(table).toContain('[bench/results/soak-latest.json](../bench/results/soak-latest.json)');

    copyFileSync('bench/results/2026-11-24T12-50-37Z.json', join(dir, 'run.json'));
    const http = benchTable('run.json:http:embed-1-float', dir);
    expect(http).toContain('`npx tsx bench/run.ts --only http --no-int8 --targets gateway,ort');
    expect(() => benchTable('run.json:nonsense', dir)).toThrow(/no table kind "nonsense"/);
  });

  it("makes the image tables from the image benches' files, with the command each file records", () => {
    const dir = mkdtempSync(join(tmpdir(), 'onnx-gateway-bench-tables-'));
    const machine = JSON.parse(read('bench/results/image-preprocess-latest.json')) as { machine: unknown };
    const common = { when: '2026-11-27T11:00:00.000Z', machine: machine.machine };
    writeFileSync(
      join(dir, 'pre.json'),
      JSON.stringify({
        ...common,
        command: 'npx tsx bench/image-preprocess.ts --rounds 9',
        pillow: '9.4.0',
        cases: [{ workload: 'photo-jpeg', processor: 'clip', oursMs: 12.5, pillowMs: 10, ratio: 1.25 }],
      }),
    );
    const point = (target: string, rate: number, extra: object = {}) => ({
      target,
      workload: 'embed-image-photo',
      unit: 'images',
      concurrency: 16,
      durationS: 10,
      requestsPerSec: { median: rate, min: rate, max: rate },
      unitsPerSec: { median: rate, min: rate, max: rate },
      p50Ms: { median: 4000, min: 4000, max: 4000 },
      p99Ms: { median: 6000, min: 6000, max: 6000 },
      non2xx: 0,
      errors: 0,
      timeouts: 0,
      statusCodes: {},
      ...extra,
    });
    writeFileSync(
      join(dir, 'run-images.json'),
      JSON.stringify({
        startedAt: '2026-11-27T15:00:00.000Z',
        machine: machine.machine,
        argv: ['--only', 'http', '--targets', 'gateway,ort', '--workloads', 'embed-image-photo'],
        models: { dir: '.data/standins-real', embed: 'e', rerank: 'r', image: 'Xenova/clip-vit-base-patch32' },
        http: [
          {
            name: 'gateway',
            kind: 'gateway',
            variant: 'fp32',
            points: [
              point('gateway', 3.5, {
                phasesMs: {
                  parse: 6.2,
                  base64: 5.1,
                  header: 0.02,
                  tokenize: 0,
                  queue: 900,
                  preprocess: 210,
                  inference: 2800,
                },
                cpuPerRequestMs: { main: 17.5, other: 480 },
              }),
            ],
          },
          { name: 'ort-1x2-b16', kind: 'raw', variant: 'fp32', points: [point('ort-1x2-b16', 4)] },
        ],
        ratios: {
          vsSideBySide: [
            {
              target: 'gateway',
              workload: 'embed-image-photo',
              concurrency: 16,
              unitsPerSec: 3.5,
              raw: 'ort-1x2-b16',
              rawUnitsPerSec: 4,
              ratio: 0.875,
              layouts: [],
            },
          ],
          c1LatencyVsSideBySide: [],
        },
      }),
    );
    const images = benchTable('run-images.json:http:embed-image-photo', dir);
    expect(images).toContain('| 16 | 3.5 | 4.0 | x0.88 |');
    // The models dir came from the environment: the command names it.
    expect(images).toContain(
      'made by `ONNX_GATEWAY_MODELS_DIR=.data/standins-real npx tsx bench/run.ts --only http --targets gateway,ort --workloads embed-image-photo`',
    );
    const split = benchTable('run-images.json:phases:embed-image-photo', dir);
    expect(split).toContain(
      '| target | c | parse (ms) | base64 (ms) | header (ms) | tokenize (ms) | queue (ms) | preprocess (ms) | inference (ms) |',
    );
    expect(split).toContain('| gateway | 16 | 6.2 | 5.1 | 0.0 | 0.0 | 900.0 | 210.0 | 2800.0 | 17.5 / 480.0 |');

    const pre = benchTable('pre.json:image-preprocess', dir);
    expect(pre).toContain('| 1920x1080 JPEG q90 | CLIP | 12.50 | 10.00 | 1.25x |');
    expect(pre).toContain('made by `npx tsx bench/image-preprocess.ts --rounds 9`');
    expect(pre).toContain('2026-11-27 11:00 UTC');
  });
});
