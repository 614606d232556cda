/**
 * Rewrites the docs' generated tables between their markers: the configuration table in
 * docs/configuration.md from src/config.ts (and its tracing variables from src/tracing/settings.ts), the model table in docs/models.md from the catalogue
 * (models/*.json), and in every docs page each bench table from the result file its marker names
 * (bench/lib/tables.ts). Run with `npm run docs`; tests fail when a page and its source disagree.
 */
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fillBenchTables } from '../bench/lib/tables.js';
import { catalogueTable } from '../src/cli/models-list.js';
import { configTable } from '../src/config.js';
import { Catalogue } from '../src/models/catalogue.js';
import { tracingTable } from '../src/tracing/settings.js';

/** Replaces what is between `<!-- name:start -->` and `<!-- name:end -->` in a file. */
function fillBetween(file: string, name: string, table: string): void {
  const text = readFileSync(file, 'utf8');
  const start = `<!-- ${name}:start -->`;
  const end = `<!-- ${name}:end -->`;
  const from = text.indexOf(start);
  const to = text.indexOf(end);
  if (from < 0 || to < 0) throw new Error(`${file} has no ${name} markers`);
  writeFileSync(file, `${text.slice(0, from + start.length)}\n${table}\n${text.slice(to)}`);
}

fillBetween('docs/configuration.md', 'config-table', configTable());
fillBetween('docs/configuration.md', 'tracing-table', tracingTable());
fillBetween('docs/models.md', 'model-table', catalogueTable(Catalogue.load()));
for (const name of readdirSync('docs').filter((f) => f.endsWith('.md'))) {
  const file = join('docs', name);
  const text = readFileSync(file, 'utf8');
  const filled = fillBenchTables(text);
  if (filled !== text) writeFileSync(file, filled);
}
