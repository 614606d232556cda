import { describe, expect, it } from 'vitest';
import { alignTokens } from '../../src/text/alignment.js';

const spans = (text: string, pieces: string[]) =>
  alignTokens(text, pieces).map((s) => (s ? Array.from(text).slice(s.start, s.stop).join('') : null));

describe('alignTokens', () => {
  it('places lower-cased, accent-stripped WordPiece tokens on the original text', () => {
    expect(spans('Héllo, Wörld testing', ['hello', ',', 'world', 'test', '##ing'])).toEqual([
      'Héllo',
      ',',
      'Wörld',
      'test',
      'ing',
    ]);
  });

  it('counts code points, so characters outside the BMP take one offset', () => {
    const result = alignTokens('👍 ok', ['[UNK]', 'ok']);
    expect(result).toEqual([null, { start: 2, stop: 4 }]);
  });

  it('skips a word the tokenizer could not place and finds the next token', () => {
    expect(spans('a 🦜🦜🦜 b', ['a', '[UNK]', 'b'])).toEqual(['a', null, 'b']);
  });

  it('keeps combining accents with their letter and skips control characters', () => {
    const decomposed = 'cafe\u0301 x\u0000y';
    expect(spans(decomposed, ['cafe', 'xy'])).toEqual(['cafe\u0301', 'x\u0000y']);
  });

  it('matches compatibility forms and CJK characters one by one', () => {
    expect(spans('ｆｏｏ 日本', ['foo', '日', '本'])).toEqual(['ｆｏｏ', '日', '本']);
  });

  it('answers null for an empty piece and for a piece that is not in the text', () => {
    expect(alignTokens('abc', ['', 'zzz', 'abc'])).toEqual([null, null, { start: 0, stop: 3 }]);
  });
});
