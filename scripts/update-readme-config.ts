/**
 * Rewrites README.md's configuration table from src/config.ts (between the config-table markers).
 * Run with `npm run docs:config`; a test fails when README and config.ts disagree.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { configTable } from '../src/config.js';

const start = '<!-- config-table:start -->';
const end = '<!-- config-table:end -->';
const readme = readFileSync('README.md', 'utf8');
const from = readme.indexOf(start);
const to = readme.indexOf(end);
if (from < 0 || to < 0) throw new Error('README.md has no config-table markers');
writeFileSync('README.md', `${readme.slice(0, from + start.length)}\n${configTable()}\n${readme.slice(to)}`);
