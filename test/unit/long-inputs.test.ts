/**
 * Inputs past the window, piece by piece: the mode a request resolves to, the windows of an input
 * (with and without a prompt), their weighted average, late chunking's spans and the models it
 * applies to. The vectors themselves are checked against numpy in test/e2e/long-inputs.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { Limits } from '../../src/core/context.js';
import { checkLateChunking, meanOfSpans } from '../../src/core/late-chunking.js';
import {
  averageWindows,
  chunkWindows,
  defaultLongInputs,
  longInputsOf,
  windowSpans,
  type LongInputs,
} from '../../src/core/long-inputs.js';
import { ApiError } from '../../src/errors.js';
import type { ServedModel } from '../../src/models/registry.js';
import { TextTokenizer } from '../../src/text/index.js';
import { tokenizerJson } from '../fixtures/tiny-models.js';

const limits = (truncate: boolean, longInputs?: LongInputs): Limits => ({
  maxInputs: 16,
  maxInputChars: 1000,
  truncate,
  rerankMaxChunks: 1,
  rerankChunkOverlap: 0,
  longInputs,
});

/** The ApiError `run` throws. */
function refusal(run: () => unknown): ApiError {
  try {
    run();
  } catch (error) {
    if (error instanceof ApiError) return error;
    throw error;
  }
  throw new Error('nothing was thrown');
}

describe('long_inputs', () => {
  it('is the request field, else its truncate, else the setting, else what truncate says', () => {
    expect(longInputsOf({ longInputs: 'chunk', truncate: false }, limits(true), true, 'x')).toBe('chunk');
    expect(longInputsOf({ truncate: false }, limits(true, 'chunk'), true, 'x')).toBe('refuse');
    expect(longInputsOf({ truncate: true }, limits(false, 'refuse'), true, 'x')).toBe('truncate');
    expect(longInputsOf({}, limits(true, 'chunk'), true, 'x')).toBe('chunk');
    expect(defaultLongInputs(limits(false))).toBe('refuse');
    expect(defaultLongInputs(limits(true))).toBe('truncate');
  });

  it('refuses chunk where windows can not be averaged, and a default of chunk cuts or refuses there', () => {
    const error = refusal(() => longInputsOf({ longInputs: 'chunk' }, limits(true), false, 'sparse vectors'));
    expect(error.code).toBe('invalid_request');
    expect(error.param).toBe('long_inputs');
    expect(error.message).toContain('sparse vectors');
    expect(longInputsOf({}, limits(true, 'chunk'), false, 'x')).toBe('truncate');
    expect(longInputsOf({}, limits(false, 'chunk'), false, 'x')).toBe('refuse');
    expect(refusal(() => longInputsOf({ longInputs: 'cut' as LongInputs }, limits(true), true, 'x')).param).toBe(
      'long_inputs',
    );
  });
});

describe('windows', () => {
  it('splits content into consecutive spans that fill the room, the last one shorter', () => {
    expect(windowSpans(5, 2)).toEqual([
      [0, 2],
      [2, 4],
      [4, 5],
    ]);
    expect(windowSpans(4, 2)).toEqual([
      [0, 2],
      [2, 4],
    ]);
    expect(windowSpans(0, 3)).toEqual([[0, 0]]);
    expect(() => windowSpans(4, 0)).toThrow(RangeError);
  });

  const tokenizer = TextTokenizer.fromJson(tokenizerJson());
  const model = { id: 'tiny', maxTokens: 8, tokenizer } as unknown as ServedModel;
  const [cls, sep] = tokenizer.singleSpecialIds;
  const ids = (text: string) => Array.from(tokenizer.encode(text));

  it('feeds each window with its special tokens, and an input that fits as it is', () => {
    const content = tokenizer.encode('the cat sat on the mat with a hat and a bat');
    expect(content.length).toBeGreaterThan(12);
    const { sequences, contentTokens } = chunkWindows(model, content, new Int32Array(0), 1000, 'input[0]');
    expect(contentTokens.slice(0, -1).every((n) => n === 6)).toBe(true);
    expect(contentTokens.reduce((a, b) => a + b, 0)).toBe(content.length);
    expect(sequences.map((s) => s.length)).toEqual(contentTokens.map((n) => n + 2));
    expect(sequences.flatMap((s) => Array.from(s.subarray(1, -1)))).toEqual(Array.from(content));
    for (const sequence of sequences) expect([sequence[0], sequence.at(-1)]).toEqual([cls, sep]);

    const short = tokenizer.encode('the cat');
    const whole = chunkWindows(model, short, new Int32Array(0), 1000, 'input[0]');
    expect(whole.sequences).toEqual([tokenizer.single(short, 8)]);
    expect(whole.contentTokens).toEqual([short.length]);
  });

  it('puts the prompt before every window and leaves it out of the weights', () => {
    const prompt = tokenizer.encode('query: ');
    expect(prompt.length).toBe(2);
    const joined = tokenizer.encode('query: the cat sat on the mat with a hat');
    const { sequences, contentTokens } = chunkWindows(model, joined, prompt, 1000, 'input[0]');
    expect(contentTokens.slice(0, -1).every((n) => n === 4)).toBe(true);
    expect(contentTokens.reduce((a, b) => a + b, 0)).toBe(joined.length - 2);
    for (const sequence of sequences) expect(Array.from(sequence.subarray(1, 3))).toEqual(ids('query:'));
  });

  it('refuses an input over maxInputTokens, and a prompt that leaves no room', () => {
    const content = tokenizer.encode('the cat sat on the mat');
    const long = refusal(() => chunkWindows(model, content, new Int32Array(0), content.length + 1, 'input[2]'));
    expect(long.code).toBe('input_too_long');
    expect(long.param).toBe('input[2]');
    expect(long.message).toContain(`${content.length + 2} tokens`);
    const prompt = tokenizer.encode('the cat sat on the mat');
    const full = tokenizer.encode('the cat sat on the mat with a hat');
    expect(refusal(() => chunkWindows(model, full, prompt, 1000, 'input[0]')).code).toBe('invalid_request');
  });

  it('averages the rows of each input weighted by content tokens; a lone window is kept as it is', () => {
    const rows = Float32Array.from([1, 2, 3, 5, 10, 20, 0.1, 0.2]);
    const out = averageWindows(rows, 2, [[1, 3], [6], [2]]);
    expect(Array.from(out.subarray(0, 2))).toEqual([2.5, 4.25]);
    expect(Array.from(out.subarray(2))).toEqual(Array.from(rows.subarray(4)));
    expect(() => averageWindows(rows, 2, [[1, 1]])).toThrow(RangeError);
  });
});

describe('late chunking', () => {
  it('averages each span of token rows', () => {
    const rows = Float32Array.from([1, 0, 3, 0, 0, 4, 0, 8]);
    expect(
      Array.from(
        meanOfSpans(rows, 2, [
          [0, 2],
          [2, 4],
        ]),
      ),
    ).toEqual([2, 0, 0, 6]);
    expect(() => meanOfSpans(rows, 2, [[3, 5]])).toThrow(RangeError);
  });

  const model = (facts: object) =>
    ({
      id: 'm',
      pooling: 'mean',
      output: { name: 'last_hidden_state', pooled: false },
      heads: { kinds: ['dense', 'tokens'] },
      ...facts,
    }) as unknown as ServedModel;

  it('applies to mean-pooling models that pool token vectors here, and names what others do', () => {
    expect(() => checkLateChunking(model({}))).not.toThrow();
    const cls = refusal(() => checkLateChunking(model({ pooling: 'cls' })));
    expect(cls.param).toBe('late_chunking');
    expect(cls.message).toContain('pools by cls');
    const pooled = refusal(() => checkLateChunking(model({ output: { name: 'sentence_embedding', pooled: true } })));
    expect(pooled.message).toContain('sentence_embedding');
  });
});
