/**
 * What `onnx-gateway embed` reads: a JSONL file (each line's `text`, or the field `--field` names;
 * its `id`, else the line number), a text file (one input a line, the line number its id) or a
 * folder of .txt / .md files (the relative path its id), streamed in order.
 */
import { createReadStream, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { createInterface } from 'node:readline';

export interface Input {
  id: string;
  text: string;
}

/** The inputs of INPUT, in order, streamed (a folder's files are read one at a time). */
export async function* readInputs(path: string, field: string): AsyncGenerator<Input> {
  if (statSync(path).isDirectory()) {
    const files = readdirSync(path, { recursive: true, encoding: 'utf8' })
      .filter((name) => /\.(txt|md)$/i.test(name))
      .sort();
    for (const name of files)
      yield { id: relative(path, join(path, name)), text: readFileSync(join(path, name), 'utf8') };
    return;
  }
  const jsonl = /\.jsonl$/i.test(path);
  let number = 0;
  for await (const line of createInterface({ input: createReadStream(path), crlfDelay: Infinity })) {
    number += 1;
    if (line.trim() === '') continue;
    if (!jsonl) {
      yield { id: String(number), text: line };
      continue;
    }
    const record = JSON.parse(line) as Record<string, unknown>;
    const text = record[field];
    if (typeof text !== 'string') throw new Error(`${path}:${number}: the field "${field}" is not a string.`);
    yield {
      id: typeof record.id === 'string' || typeof record.id === 'number' ? String(record.id) : String(number),
      text,
    };
  }
}

/** How many inputs INPUT has, for the progress bar (a pass over the file that parses nothing). */
export async function countInputs(path: string): Promise<number> {
  if (statSync(path).isDirectory())
    return readdirSync(path, { recursive: true, encoding: 'utf8' }).filter((n) => /\.(txt|md)$/i.test(n)).length;
  let count = 0;
  for await (const line of createInterface({ input: createReadStream(path), crlfDelay: Infinity }))
    if (line.trim() !== '') count += 1;
  return count;
}
