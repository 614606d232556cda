/**
 * The server's version, read once from package.json (one folder above both src/ and dist/): the
 * OpenAPI document, TEI's /info and the reader's User-Agent all say this one.
 */
import { readFileSync } from 'node:fs';

export const version: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;
