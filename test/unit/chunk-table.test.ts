import { describe, expect, it } from 'vitest';
import { ChunkTable, type IdSink } from '../../src/text/chunk-table.js';

function hashOf(text: string, start: number, end: number): number {
  let hash = ChunkTable.seed;
  for (let i = start; i < end; i++) hash = ChunkTable.step(hash, text.charCodeAt(i));
  return hash;
}

/** The ids a lookup appends, or undefined on a miss. */
function lookup(
  table: ChunkTable,
  text: string,
  start: number,
  end: number,
  hash = hashOf(text, start, end),
): number[] | undefined {
  const got: number[] = [];
  const sink: IdSink = { append: (source, from, count) => got.push(...source.subarray(from, from + count)) };
  return table.get(text, start, end, hash, sink) ? got : undefined;
}

function put(table: ChunkTable, key: string, ids: number[], hash = hashOf(key, 0, key.length)): void {
  table.set(key, 0, key.length, hash, Int32Array.from(ids));
}

describe('ChunkTable', () => {
  it('finds a span of a text by its hash and contents, in place', () => {
    const table = new ChunkTable(100, 1 << 20, 8);
    put(table, 'cat', [1]);
    put(table, 'cats', [2, 3]);
    const text = 'the cats and the cat';
    expect(lookup(table, text, 4, 8)).toEqual([2, 3]);
    expect(lookup(table, text, 17, 20)).toEqual([1]);
    expect(lookup(table, text, 0, 3)).toBeUndefined();
  });

  it('stores a span cut from a longer text, and an empty id list', () => {
    const table = new ChunkTable(100, 1 << 20, 8);
    const text = 'say héllo 👋 now';
    table.set(text, 4, 9, hashOf(text, 4, 9), Int32Array.of(7, 8, 9));
    table.set(text, 10, 12, hashOf(text, 10, 12), new Int32Array(0));
    expect(lookup(table, 'héllo', 0, 5)).toEqual([7, 8, 9]);
    expect(lookup(table, '👋', 0, 2)).toEqual([]);
    expect(lookup(table, 'hello', 0, 5)).toBeUndefined();
  });

  it('tells apart keys that share a hash', () => {
    const table = new ChunkTable(100, 1 << 20, 8);
    // Forced collisions: the same hash for different keys must never answer the other's ids.
    put(table, 'ab', [1], 7);
    put(table, 'cd', [2], 7);
    put(table, 'abc', [3], 7);
    expect(lookup(table, 'ab', 0, 2, 7)).toEqual([1]);
    expect(lookup(table, 'cd', 0, 2, 7)).toEqual([2]);
    expect(lookup(table, 'xabc', 1, 4, 7)).toEqual([3]);
    expect(lookup(table, 'ef', 0, 2, 7)).toBeUndefined();
  });

  it('grows, then starts over once full at its largest', () => {
    const table = new ChunkTable(64, 1 << 20, 4);
    const words = Array.from({ length: 64 }, (_, i) => `w${i}`);
    words.forEach((w, i) => put(table, w, [i, i + 1000]));
    // 64 entries fit (the table grew from 4 slots to 128): all are found.
    words.forEach((w, i) => expect(lookup(table, w, 0, w.length)).toEqual([i, i + 1000]));
    put(table, 'one-more', [99]);
    expect(lookup(table, 'one-more', 0, 8)).toEqual([99]);
    expect(lookup(table, 'w0', 0, 2)).toBeUndefined();
  });

  it('starts over when its pool of ids and keys is full, and skips an entry larger than the pool', () => {
    // 64 values of 4 bytes: ten entries of one id and a 5-character key fill 60 of them.
    const table = new ChunkTable(1000, 256, 64);
    const words = Array.from({ length: 10 }, (_, i) => `word${i}`);
    words.forEach((w, i) => put(table, w, [i]));
    words.forEach((w, i) => expect(lookup(table, w, 0, w.length)).toEqual([i]));
    put(table, 'word10', [10]);
    expect(lookup(table, 'word10', 0, 6)).toEqual([10]);
    expect(lookup(table, 'word0', 0, 5)).toBeUndefined();
    put(table, 'x'.repeat(100), [1]);
    expect(lookup(table, 'x'.repeat(100), 0, 100)).toBeUndefined();
    expect(lookup(table, 'word10', 0, 6)).toEqual([10]);
  });
});
