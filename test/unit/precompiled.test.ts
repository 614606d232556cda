import { describe, expect, it } from 'vitest';
import { PrecompiledCharsmap, TextTokenizer, unigramSegmenter } from '../../src/text/index.js';
import { clusters } from '../../src/text/precompiled.js';

/**
 * A charsmap compiled by sentencepiece's trainer (normalization_rule_tsv) from these rules, so the
 * expected outputs can be checked by hand:
 *   U+FB01 -> "fi"         U+00AA -> "a"          U+00AA U+0300 -> U+00E0
 *   U+3000 -> " "          TAB -> " "             CR -> " "          CR LF -> " "
 *   "A" U+0301 -> U+00C1   U+1100 U+1161 -> U+AC00 (Hangul ga)     U+1F44D U+1F3FD -> "+"
 */
const RULES =
  'AAQAAAAgAAAJDQAAAAAAgAAAAIDMDAIADRkAAIEFAAAJAACAqgkAAAotAAAEAACAgB0AAAwAAICEDAIAgIADAOFoAgCFgAIAoQ0A' +
  'AA8AAICAHAIAgFkAAKwIAgCBBQAABgAAgPB0AgCfTAIAnyACAJEoAgCN0AMAj/gCAL0FAAACAACAIQAAACAAAAAjAAAAIgAAACUA' +
  'AAAkAAAAJwAAACYAAAApAAAAKAAAACsAAAAqAAAALQAAACwAAAAvAAAALgAAADEAAAAwAAAAMwAAADIAAAA1AAAANAAAADcAAAA2' +
  'AAAAOQAAADgAAAA7AAAAOgAAAD0AAAA8AAAAPwAAAD4AAABBAAAAQAAAAEMAAABCAAAARQAAAEQAAABHAAAARgAAAEkAAABBBAIA' +
  'SwAAAEoAAABNAAAATAAAAE8AAABOAAAAUQAAAFAAAABTAAAAUgAAAFUAAABUAAAAVwAAAFYAAABZAAAAWAAAAFsAAABaAAAAXQAA' +
  'AFwAAABfAAAAXgAAAGEAAABgAAAAYwAAAGIAAABlAAAAZAAAAGcAAABmAAAAaQAAAGgAAABrAAAAagAAAG0AAABsAAAAbwAAAG4A' +
  'AABxAAAAcAAAAHMAAAByAAAAdQAAAHQAAAB3AAAAdgAAAHkAAAB4AAAAewAAAHoAAAB9AAAAfAAAAH8AAAB+AAAAgQAAAIAAAACD' +
  'AAAAggAAAIUAAACEAAAAhwAAAIYAAACJAAAAiAAAAIsAAACKAAAAjQAAAIwAAACPAAAAjgAAAJEAAACQAAAAkwAAAJIAAACVAAAA' +
  'lAAAAJcAAACWAAAAmQAAAJgAAACbAAAAmgAAAJ0AAACcAAAAnwAAAJ4AAAChAAAAoAAAAKMAAACiAAAApQAAAKQAAACnAAAApgAA' +
  'AKkAAACoAAAAqwAAAKoAAACtAAAArAAAAK8AAACuAAAAsQAAALAAAACzAAAAsgAAALUAAAC0AAAAtwAAALYAAAC5AAAAuAAAALsA' +
  'AAC6AAAAvQAAALwAAAC/AAAAvgAAAMEAAADAAAAAwwAAAMIAAADFAAAAxAAAAMw0AQDGAAAAyQAAAMgAAADCoAEAygAAAM0AAADM' +
  'AAAAzwAAAM4AAADRAAAA0AAAANMAAADSAAAA1QAAANQAAADXAAAA1gAAANkAAADYAAAA2wAAANoAAADdAAAA3AAAAN8AAADeAAAA' +
  '4QAAAOAAAADjAAAA4gAAAOUAAADkAAAA5wAAAO94AQDpAAAA4YABAOsAAADj4AEA7QAAAOwAAADvAAAA7gAAAPEAAADwAAAA8wAA' +
  'APIAAAD1AAAA9AAAAPcAAAD2AAAA8PgBAPgAAAD7AAAA+gAAAP0AAAD8AAAA/wAAAP4AAAAgACsAYQBmaQDDgQDDoADqsIAA';

describe('PrecompiledCharsmap', () => {
  const charsmap = PrecompiledCharsmap.fromBase64(RULES);

  it('replaces single characters and leaves the others as they are', () => {
    expect(charsmap.normalize('\ufb01ne')).toBe('fine');
    expect(charsmap.normalize('x\u3000y\tz')).toBe('x y z');
    expect(charsmap.normalize('plain text')).toBe('plain text');
    expect(charsmap.normalize('')).toBe('');
    // A NUL byte ends a key: never matched.
    expect(charsmap.normalize('a\0b')).toBe('a\0b');
  });

  it('replaces a grapheme cluster under 6 bytes whole, by the shortest key that prefixes it (as HF tokenizers does)', () => {
    // sentencepiece's longest match would give U+00E0; HF tokenizers takes the U+00AA rule and drops the accent.
    expect(charsmap.normalize('\u00aa\u0300')).toBe('a');
    expect(charsmap.normalize('A\u0301')).toBe('\u00c1');
    expect(charsmap.normalize('A\u0301\u0301!')).toBe('\u00c1!');
    // CR LF is one cluster: the CR rule replaces both.
    expect(charsmap.normalize('a\r\nb')).toBe('a b');
  });

  it('looks each character up alone in a cluster of 6 bytes or more', () => {
    // Two 3-byte jamo (6 bytes): the two-character rule is not applied.
    expect(charsmap.normalize('\u1100\u1161')).toBe('\u1100\u1161');
    // Thumbs up with a skin tone (8 bytes).
    expect(charsmap.normalize('\u{1F44D}\u{1F3FD}')).toBe('\u{1F44D}\u{1F3FD}');
    expect(charsmap.normalize('\u{1F44D}\u{1F3FD}\ufb01')).toBe('\u{1F44D}\u{1F3FD}fi');
  });

  it('refuses a blob that is not a charsmap', () => {
    expect(() => new PrecompiledCharsmap(new Uint8Array([1]))).toThrow(/too short/);
    expect(() => new PrecompiledCharsmap(new Uint8Array([64, 0, 0, 0, 0]))).toThrow(/bad trie size/);
  });
});

describe('unigramSegmenter', () => {
  it('breaks ties as HF tokenizers does: a later path must score strictly higher', () => {
    // i i i, i ii and ii i all score -3; the first path found to each position stays.
    const segment = unigramSegmenter(
      [
        ['<unk>', 0],
        ['i', -1],
        ['ii', -2],
      ],
      0,
    );
    expect(segment('iii')).toEqual(['i', 'ii']);
    expect(segment('ii')).toEqual(['ii']);
  });

  it('fuses runs of unknown characters into one token', () => {
    const segment = unigramSegmenter(
      [
        ['<unk>', 0],
        ['a', -1],
        ['b', -1],
      ],
      0,
    );
    expect(segment('a\u{13000}\u{13001}xb')).toEqual(['a', '\u{13000}\u{13001}x', 'b']);
    expect(segment('')).toEqual([]);
  });
});

describe('TextTokenizer with a SentencePiece Unigram tokenizer.json', () => {
  const vocab: [string, number][] = [
    ['<s>', 0],
    ['<pad>', 0],
    ['</s>', 0],
    ['<unk>', 0],
    ['\u2581', -2],
    ['\u2581fine', -3],
    ['a', -4],
    ['\u2581a', -3],
    ['b', -4],
    ['\u00c1', -5],
    ['<mask>', 0],
  ];
  const tok = TextTokenizer.fromJson({
    added_tokens: ['<s>', '<pad>', '</s>', '<unk>'].map((content, id) => ({
      id,
      content,
      special: true,
      normalized: false,
      lstrip: false,
      rstrip: false,
      single_word: false,
    })),
    normalizer: {
      type: 'Sequence',
      normalizers: [
        { type: 'Precompiled', precompiled_charsmap: RULES },
        { type: 'Replace', pattern: { Regex: ' {2,}' }, content: ' ' },
      ],
    },
    pre_tokenizer: { type: 'Metaspace', replacement: '\u2581', add_prefix_space: true, prepend_scheme: 'always' },
    model: { type: 'Unigram', unk_id: 3, vocab },
  });

  it('normalizes with the charsmap inside a Sequence', () => {
    const ids = (text: string) => Array.from(tok.encode(text));
    expect(ids('\ufb01ne')).toEqual([5]);
    expect(ids('\u00aa\u0300\u3000\u3000b')).toEqual([7, 4, 8]);
    expect(ids('A\u0301')).toEqual([4, 9]);
  });

  it('encodes a word of more pieces than a call can take arguments (the library spreads them into push)', () => {
    const ids = tok.encode('ab'.repeat(200_000));
    expect(ids.length).toBe(400_000);
    expect(Array.from(ids.subarray(0, 3))).toEqual([7, 8, 6]);
  });
});

describe('grapheme clusters a window at a time', () => {
  // Intl.Segmenter's iteration is quadratic in the number of clusters: normalize() segments long
  // texts in windows, which must give exactly the clusters of the whole text.
  const whole = new Intl.Segmenter(undefined, { granularity: 'grapheme' });
  let seed = 7;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const parts = [
    'a',
    ' ',
    '\r',
    '\n',
    '\u0301',
    '\u200d',
    '👩',
    '🇫',
    '🇷',
    'क',
    '्',
    'ष',
    '\u00a0',
    '中',
    '\ud83d',
    '\ude00',
    'ᄀ',
    'ᅡ',
    'ᆨ',
  ];
  const texts = [
    '🇫🇷🇩🇪🇮🇹x🇫🇷🇩🇪🇮🇹🇫',
    '\r\n'.repeat(40),
    'e' + '\u0301'.repeat(100) + 'x',
    '👩‍👩‍👧‍👦'.repeat(10),
    'क्षि'.repeat(20),
    '😀'.repeat(30) + 'a',
    ...Array.from({ length: 40 }, () =>
      Array.from({ length: 50 + Math.floor(random() * 400) }, () => parts[Math.floor(random() * parts.length)]).join(
        '',
      ),
    ),
  ];
  it.each([3, 4, 7, 16, 256])('window %i gives the clusters of the whole text', (window) => {
    for (const text of texts) {
      expect([...clusters(text, window)].map(({ segment, index }) => [segment, index])).toEqual(
        [...whole.segment(text)].map(({ segment, index }) => [segment, index]),
      );
    }
  });
});
