/**
 * Rewrites README.md's generated tables between their markers: the configuration table from
 * src/config.ts and the model table from the catalogue (models/*.json). Run with `npm run docs`;
 * tests fail when README and the sources disagree.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { catalogueTable } from '../src/cli/models-list.js';
import { configTable } from '../src/config.js';
import { Catalogue } from '../src/models/catalogue.js';

let readme = readFileSync('README.md', 'utf8');
for (const [name, table] of [
  ['config-table', configTable()],
  ['model-table', catalogueTable(Catalogue.load())],
] as const) {
  const start = `<!-- ${name}:start -->`;
  const end = `<!-- ${name}:end -->`;
  const from = readme.indexOf(start);
  const to = readme.indexOf(end);
  if (from < 0 || to < 0) throw new Error(`README.md has no ${name} markers`);
  readme = `${readme.slice(0, from + start.length)}\n${table}\n${readme.slice(to)}`;
}
writeFileSync('README.md', readme);
