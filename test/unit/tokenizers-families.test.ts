/**
 * Each model family's tokenizer against an independent implementation: scripts/standins/tokenizers.py
 * writes every family's real tokenizer files (the real ones where they are here, else small trained
 * ones of the real type, layout and template) and the ids its own encoder gives (sentencepiece for
 * XLM-R; its own WordPiece and byte-level BPE otherwise). TextTokenizer must give exactly those ids.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { TextTokenizer } from '../../src/text/index.js';
import { madeOnce } from '../helpers/made-once.js';
import { missing } from '../helpers/resources.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const PYTHON = '/usr/bin/python3';
const KINDS = ['bert', 'mpnet', 'xlmr', 'modernbert', 'qwen3', 'clip', 'siglip', 'gemma'] as const;
type Kind = (typeof KINDS)[number];

interface Expected {
  vocab_size: number;
  pad_id: number;
  single_specials: number;
  pair_specials: number;
  items: { text: string; ids: number[]; single: number[]; sentencepiece_differs?: string | null }[];
  pairs: { a: number; b: number; ids: number[]; type_ids: number[] }[];
}

/** Why the independent tokenizers cannot run here, or undefined if they can. */
function missingPython(): string | undefined {
  const probe = spawnSync(PYTHON, ['-c', 'import sentencepiece, numpy, regex'], { encoding: 'utf8' });
  if (probe.status === 0) return undefined;
  return `${PYTHON} cannot import sentencepiece, numpy and regex: apt-get install python3-sentencepiece python3-numpy python3-regex`;
}

const pythonMissing = missingPython();

describe.skipIf(missing(pythonMissing === undefined, pythonMissing ?? ''))(
  `tokenizer families against independent implementations${pythonMissing ? ` (skipped: ${pythonMissing})` : ''}`,
  () => {
    let out: string;
    let expected: Record<Kind, Expected>;

    beforeAll(async () => {
      // Training the small tokenizers takes a while: made once per version of the scripts and texts.
      const shared = resolve(root, '../shared');
      out = await madeOnce(
        {
          name: 'tokenizers',
          sources: [join(root, 'scripts/standins'), join(shared, 'models/hub-files'), join(shared, 'eval/texts')],
        },
        (dir) => {
          execFileSync(PYTHON, ['scripts/standins/tokenizers.py', '--out', dir, '--shared', shared], {
            cwd: root,
            stdio: ['ignore', 'ignore', 'inherit'],
          });
        },
      );
      expected = JSON.parse(readFileSync(join(out, 'expected.json'), 'utf8')) as Record<Kind, Expected>;
    }, 300_000);

    it("xlmr: the ids are sentencepiece's own but where HF tokenizers differs by design", () => {
      const reasons = new Map<string, number>();
      for (const item of expected.xlmr.items) {
        const reason = item.sentencepiece_differs ?? 'same';
        reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
      }
      // normalization: HF's per-grapheme charsmap rule; whitespace: HF keeps a U+2581 for trailing
      // spaces; tie: equal-scored segmentations that float32 sums (sentencepiece) order otherwise.
      expect([...reasons.keys()].filter((r) => !['same', 'normalization', 'whitespace', 'tie'].includes(r))).toEqual(
        [],
      );
      expect(reasons.get('same')!).toBeGreaterThan(0.95 * expected.xlmr.items.length);
    });

    describe.each(KINDS)('%s', (kind) => {
      let tok: TextTokenizer;
      let want: Expected;

      beforeAll(async () => {
        tok = await TextTokenizer.fromDirectory(join(out, kind));
        want = expected[kind];
      });

      it('reads the template and the padding id from the files', () => {
        expect(tok.singleSpecials).toBe(want.single_specials);
        expect(tok.pairSpecials).toBe(want.pair_specials);
        expect(tok.padId).toBe(want.pad_id);
      });

      it('encodes every text to the independent content ids', () => {
        expect(want.items.length).toBeGreaterThan(600);
        const wrong = want.items.flatMap((item, i) => {
          const got = Array.from(tok.encode(item.text));
          return sameIds(got, item.ids) ? [] : [describeMismatch(i, item.text, item.ids, got)];
        });
        expect(wrong.slice(0, 5), `${wrong.length} of ${want.items.length} texts differ`).toEqual([]);
      });

      it('adds the template special tokens to single sequences', () => {
        const wrong = want.items.flatMap((item, i) => {
          const got = Array.from(tok.single(Int32Array.from(item.ids), item.single.length));
          return sameIds(got, item.single) ? [] : [describeMismatch(i, item.text, item.single, got)];
        });
        expect(wrong.slice(0, 5), `${wrong.length} of ${want.items.length} sequences differ`).toEqual([]);
      });

      it('builds pairs with the template ids and token type ids', () => {
        const wrong = want.pairs.flatMap((pair) => {
          const { ids, typeIds } = tok.pair(
            Int32Array.from(want.items[pair.a]!.ids),
            Int32Array.from(want.items[pair.b]!.ids),
            pair.ids.length,
          );
          const same = sameIds(Array.from(ids), pair.ids) && sameIds(Array.from(typeIds), pair.type_ids);
          return same
            ? []
            : [
                {
                  a: pair.a,
                  b: pair.b,
                  expected: pair.ids,
                  typeIds: pair.type_ids,
                  got: Array.from(ids),
                  gotTypeIds: Array.from(typeIds),
                },
              ];
        });
        expect(wrong.slice(0, 3), `${wrong.length} of ${want.pairs.length} pairs differ`).toEqual([]);
      });

      it("gives the library path's ids on the fast path, with added tokens in the text and from the word cache", () => {
        const specials = [
          '[CLS]',
          '[SEP]',
          '[MASK]',
          '[PAD]',
          '[UNK]',
          '<s>',
          '</s>',
          '<mask>',
          '<pad>',
          '<unk>',
          '<|endoftext|>',
          '<|im_start|>',
        ];
        const texts = [
          ...want.items.map((item) => item.text),
          ...specials.map((s) => `a ${s} b`),
          ...specials.map((s) => `${s}${s}text`),
          '',
          ' ',
          '\t\n',
          'Antidisestablishmentarianism supercalifragilistic',
          'x'.repeat(300),
        ];
        // A Unigram model (XLM-R's, SigLIP's) and Gemma's SentencePiece BPE fuse unknown tokens, which the
        // library does across words: they keep the library's path.
        expect(tok.fastPath).toBe(kind !== 'xlmr' && kind !== 'siglip' && kind !== 'gemma');
        // Twice: the second pass reads every short word from the cache the first pass filled.
        for (const pass of [1, 2]) {
          const wrong = texts.flatMap((text, i) => {
            const want = Array.from(tok.libraryEncode(text));
            const got = Array.from(tok.encode(text));
            return sameIds(got, want) ? [] : [{ pass, ...describeMismatch(i, text, want, got) }];
          });
          expect(wrong.slice(0, 5), `${wrong.length} of ${texts.length} texts differ`).toEqual([]);
        }
      });

      it('gives ids below the vocabulary size', () => {
        let largest = -1;
        for (const item of want.items) for (const id of tok.encode(item.text)) largest = Math.max(largest, id);
        expect(largest).toBeGreaterThan(0);
        expect(largest).toBeLessThan(want.vocab_size);
      });
    });
  },
);

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** The first differing position with some context, short enough to read in a failure message. */
function describeMismatch(index: number, text: string, want: number[], got: number[]): object {
  let at = 0;
  while (at < want.length && want[at] === got[at]) at++;
  return {
    index,
    text: JSON.stringify(text).slice(0, 120),
    at,
    expected: want.slice(Math.max(0, at - 3), at + 8),
    got: got.slice(Math.max(0, at - 3), at + 8),
  };
}
