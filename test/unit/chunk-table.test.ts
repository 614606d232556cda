import { describe, expect, it } from 'vitest';
import { ChunkTable } from '../../src/text/chunk-table.js';

function hashOf(text: string, start: number, end: number): number {
  let hash = ChunkTable.seed;
  for (let i = start; i < end; i++) hash = ChunkTable.step(hash, text.charCodeAt(i));
  return hash;
}

describe('ChunkTable', () => {
  it('finds a span of a text by its hash and contents, in place', () => {
    const table = new ChunkTable<number>(100, 8);
    table.set('cat', hashOf('cat', 0, 3), 1);
    table.set('cats', hashOf('cats', 0, 4), 2);
    const text = 'the cats and the cat';
    expect(table.get(text, 4, 8, hashOf(text, 4, 8))).toBe(2);
    expect(table.get(text, 17, 20, hashOf(text, 17, 20))).toBe(1);
    expect(table.get(text, 0, 3, hashOf(text, 0, 3))).toBeUndefined();
  });

  it('tells apart keys that share a hash', () => {
    const table = new ChunkTable<string>(100, 8);
    // Forced collisions: the same hash for different keys must never answer the other's value.
    table.set('ab', 7, 'first');
    table.set('cd', 7, 'second');
    table.set('abc', 7, 'third');
    expect(table.get('ab', 0, 2, 7)).toBe('first');
    expect(table.get('cd', 0, 2, 7)).toBe('second');
    expect(table.get('xabc', 1, 4, 7)).toBe('third');
    expect(table.get('ef', 0, 2, 7)).toBeUndefined();
  });

  it('grows, then starts over once full at its largest', () => {
    const table = new ChunkTable<number>(64, 4);
    const words = Array.from({ length: 64 }, (_, i) => `w${i}`);
    words.forEach((w, i) => table.set(w, hashOf(w, 0, w.length), i));
    // 64 entries fit (the table grew from 4 slots to 128): all are found.
    words.forEach((w, i) => expect(table.get(w, 0, w.length, hashOf(w, 0, w.length))).toBe(i));
    table.set('one-more', hashOf('one-more', 0, 8), 99);
    expect(table.get('one-more', 0, 8, hashOf('one-more', 0, 8))).toBe(99);
    expect(table.get('w0', 0, 2, hashOf('w0', 0, 2))).toBeUndefined();
  });
});
