/**
 * Lines of a JSONL file read as a stream, each with where it ends in bytes, so that a run can
 * commit "everything before this byte is done" and a later run can start reading there.
 */
import { createReadStream } from 'node:fs';

export interface FileLine {
  /** The line's text without its line break. */
  text: string;
  /** 1-based line number in the file (counted from where reading started, plus `firstLine`). */
  number: number;
  /** Byte offset just past the line's break: where the next line starts. */
  end: number;
}

/** Each line of the file from byte `start` on (a line that is only whitespace is skipped, but counted). */
export async function* readLines(path: string, start = 0, firstLine = 1): AsyncGenerator<FileLine> {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let offset = start;
  let number = firstLine;
  const emit = (bytes: Buffer): FileLine | undefined => {
    offset += bytes.length;
    let text = bytes.toString('utf8');
    if (text.endsWith('\n')) text = text.slice(0, -1);
    if (text.endsWith('\r')) text = text.slice(0, -1);
    const line = { text, number, end: offset };
    number += 1;
    return text.trim() === '' ? undefined : line;
  };
  for await (const chunk of createReadStream(path, { start }) as AsyncIterable<Buffer>) {
    let from = 0;
    for (let at = chunk.indexOf(0x0a); at >= 0; at = chunk.indexOf(0x0a, from)) {
      const piece = chunk.subarray(from, at + 1);
      const bytes = pending.length > 0 ? Buffer.concat([...pending, piece], pendingBytes + piece.length) : piece;
      pending = [];
      pendingBytes = 0;
      from = at + 1;
      const line = emit(bytes);
      if (line) yield line;
    }
    if (from < chunk.length) {
      pending.push(chunk.subarray(from));
      pendingBytes += chunk.length - from;
    }
  }
  if (pendingBytes > 0) {
    const line = emit(Buffer.concat(pending, pendingBytes));
    if (line) yield line;
  }
}
