import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  bertNormalizer,
  checkLibraryPatches,
  chunkPair,
  loadLibraryTokenizer,
  ShippedTokenizer,
  longestFirst,
  readTemplate,
  TextTokenizer,
} from '../../src/text/index.js';
import { missing } from '../helpers/resources.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const modelsDir = resolve(root, process.env.ONNX_GATEWAY_MODELS_DIR ?? '.data/models');
const EMBEDDER = 'synthetic-all-MiniLM-L6-v2';
const RERANKER = 'synthetic-ms-marco-MiniLM-L-6-v2';

/** A describe title that says why it is skipped when the model is missing. */
function modelSuite(model: string): { title: string; missing: boolean } {
  const hint = `${model} not in ${modelsDir}: generate with: python3 ../shared/models/synthetic/make_models.py --out .data/models`;
  const absent = missing(existsSync(resolve(modelsDir, model, 'golden.json')), hint);
  return { title: absent ? `${model} (skipped: ${hint})` : model, missing: absent };
}

function golden<T>(model: string): T {
  return JSON.parse(readFileSync(resolve(modelsDir, model, 'golden.json'), 'utf8')) as T;
}

interface EmbedderGolden {
  items: { text: string; input_ids: number[]; num_tokens_untruncated: number; truncated: boolean }[];
  max_length_256_variant: { item_index: number; input_ids: number[] }[];
}
interface RerankerGolden {
  items: {
    query: string;
    document: string;
    input_ids: number[];
    token_type_ids: number[];
    truncated: boolean;
    query_tokens: number;
    document_tokens: number;
    document_tokens_untruncated: number;
  }[];
}

const embedder = modelSuite(EMBEDDER);
describe.skipIf(embedder.missing)(`TextTokenizer on golden ${embedder.title}`, async () => {
  const tok = embedder.missing ? undefined! : await TextTokenizer.fromDirectory(resolve(modelsDir, EMBEDDER));
  const { items, max_length_256_variant }: EmbedderGolden = embedder.missing
    ? { items: [], max_length_256_variant: [] }
    : golden<EmbedderGolden>(EMBEDDER);

  it('reads the BERT template from tokenizer.json', () => {
    expect(tok.singleSpecials).toBe(2);
    expect(tok.pairSpecials).toBe(3);
    expect(tok.padId).toBe(0);
    expect(tok.template.single.before.ids).toEqual([101]);
    expect(tok.template.single.after.ids).toEqual([102]);
  });

  it.each(items.map((item, i) => [i, JSON.stringify(item.text).slice(0, 40), item] as const))(
    'item %i %s: single(encode(text), 512) == golden input_ids',
    (_i, _title, item) => {
      expect(Array.from(tok.single(tok.encode(item.text), 512))).toEqual(item.input_ids);
    },
  );

  it('cuts the 843-token text to 512 keeping the final [SEP]', () => {
    const long = items.find((item) => item.truncated)!;
    const content = tok.encode(long.text);
    expect(content.length).toBe(843);
    expect(content.length + 2).toBe(long.num_tokens_untruncated);
    const ids = tok.single(content, 512);
    expect(ids.length).toBe(512);
    expect(ids[0]).toBe(101);
    expect(ids[511]).toBe(102);
    expect(Array.from(ids.subarray(1, 511))).toEqual(Array.from(content.subarray(0, 510)));
    for (const variant of max_length_256_variant) {
      expect(Array.from(tok.single(tok.encode(items[variant.item_index]!.text), 256))).toEqual(variant.input_ids);
    }
  });

  it('encodes empty and blank text to no content tokens', () => {
    for (const text of ['', ' ', '  \t\n\r  ', '\u00a0\u3000', '\u200b']) expect(tok.encode(text).length).toBe(0);
    expect(Array.from(tok.single(tok.encode(''), 512))).toEqual([101, 102]);
    expect(Array.from(tok.pair(tok.encode(''), tok.encode(''), 512).ids)).toEqual([101, 102, 102]);
  });

  it('decodes', () => {
    const ids = tok.single(tok.encode('Hello, World!'), 512);
    expect(tok.decode(ids)).toBe('[CLS] hello, world! [SEP]');
    expect(tok.decode(ids, true)).toBe('hello, world!');
    expect(tok.decode([])).toBe('');
  });

  it('rejects a window smaller than the special tokens', () => {
    expect(() => tok.single(tok.encode('hi'), 1)).toThrow(RangeError);
    expect(() => tok.pair(tok.encode('hi'), tok.encode('there'), 2)).toThrow(RangeError);
    expect(Array.from(tok.single(tok.encode('hello world'), 2))).toEqual([101, 102]);
  });

  // The normalizer is checked against an independent implementation in tokenizers-families.test.ts
  // (it departs from the library's where the library departs from HF tokenizers).
  it("gives the same ids as the library's own WordPiece", () => {
    const dir = resolve(modelsDir, EMBEDDER);
    const reference = new ShippedTokenizer(
      JSON.parse(readFileSync(resolve(dir, 'tokenizer.json'), 'utf8')) as object,
      JSON.parse(readFileSync(resolve(dir, 'tokenizer_config.json'), 'utf8')) as object,
    );
    // The library's WordPiece after our BertNormalizer (the BERT normalizer of this tokenizer.json).
    const normalizer = reference.normalizer!;
    expect(normalizer.constructor.name).toBe('BertNormalizer');
    normalizer.normalize = bertNormalizer({
      clean: true,
      chinese: true,
      stripAccents: true,
      lowercase: true,
    });
    const texts = [
      ...items.map((item) => item.text),
      'unaffable pneumonoultramicroscopicsilicovolcanoconiosis ##ing [CLS] [SEP]x [unused1]',
      'x'.repeat(100),
      'x'.repeat(101),
      '😀'.repeat(60),
      'a\ud800b \udc00 \ud83d \ud800\u200b\udc00',
      '𠀀𠀁 ﬁne Ⅻ 가 가 中文 豈 㐀',
      // CJK from each spaced-out block between letters, and an astral one.
      'x\u4e2dy x\u3400y x\uf900y x\ufa6ay x\u{20000}y',
      // Dropped, kept and whitespace-mapped characters of clean_text.
      'a\u0000b\ufffdc\u200bd\ufeffe\u0085f\u2028g\u000bh\u001ci\ue000j\t\n\r\f k\u3000l\u00a0m\u1680n\u202f',
    ];
    for (const file of ['mixed.jsonl', 'passages.jsonl']) {
      const path = resolve(root, '../shared/eval/texts', file);
      if (!missing(existsSync(path), `${path} is missing: the shared eval texts, in ../shared beside the checkout`))
        texts.push(
          ...readFileSync(path, 'utf8')
            .trim()
            .split('\n')
            .map((line) => (JSON.parse(line) as { text: string }).text),
        );
    }
    for (const text of texts) {
      expect(Array.from(tok.encode(text)), JSON.stringify(text).slice(0, 80)).toEqual(
        reference.encode(text, { add_special_tokens: false }).ids,
      );
    }
  });
});

const reranker = modelSuite(RERANKER);
describe.skipIf(reranker.missing)(`TextTokenizer pairs and chunking on golden ${reranker.title}`, async () => {
  const tok = reranker.missing ? undefined! : await TextTokenizer.fromDirectory(resolve(modelsDir, RERANKER));
  const { items }: RerankerGolden = reranker.missing ? { items: [] } : golden<RerankerGolden>(RERANKER);
  const long = items.find((item) => item.truncated);

  it.each(items.map((item, i) => [i, JSON.stringify(item.query).slice(0, 40), item] as const))(
    'pair %i %s: ids and type ids == golden',
    (_i, _title, item) => {
      const { ids, typeIds } = tok.pair(tok.encode(item.query), tok.encode(item.document), 512);
      expect(Array.from(ids)).toEqual(item.input_ids);
      expect(Array.from(typeIds)).toEqual(item.token_type_ids);
    },
  );

  it('cuts the 843-token document to 501 by longest_first, keeping the query', () => {
    const query = tok.encode(long!.query);
    const doc = tok.encode(long!.document);
    expect(doc.length).toBe(843);
    expect(long!.document_tokens_untruncated).toBe(843);
    const { ids } = tok.pair(query, doc, 512);
    expect(ids.length).toBe(512);
    expect(Array.from(ids.subarray(1, 1 + query.length))).toEqual(Array.from(query));
    expect(long!.document_tokens).toBe(512 - 3 - query.length);
    expect(ids[511]).toBe(102);
  });

  describe('chunkPair', () => {
    const options = { overlap: 32, maxChunks: 8 };

    it('makes the first window what plain truncation keeps, so one window is plain truncation', () => {
      const query = tok.encode(long!.query);
      const doc = tok.encode(long!.document);
      const windows = chunkPair(query, doc, 512, tok.pairSpecials, options);
      expect(windows[0]!.length).toBe(long!.document_tokens);
      const single = chunkPair(query, doc, 512, tok.pairSpecials, { ...options, maxChunks: 1 });
      expect(single).toHaveLength(1);
      expect(Array.from(tok.pair(query, single[0]!, 512).ids)).toEqual(long!.input_ids);
      expect(Array.from(tok.pair(query, single[0]!, 512).typeIds)).toEqual(long!.token_type_ids);
    });

    it('overlaps consecutive windows and covers the whole document', () => {
      const query = tok.encode(long!.query);
      const doc = tok.encode(long!.document);
      const windows = chunkPair(query, doc, 512, tok.pairSpecials, options);
      const size = 512 - 3 - query.length; // 501
      expect(windows.map((w) => w.length)).toEqual([size, doc.length - (size - 32)]);
      expect(Array.from(windows[1]!.subarray(0, 32))).toEqual(Array.from(windows[0]!.subarray(size - 32)));
      expect(windows[1]![windows[1]!.length - 1]).toBe(doc[doc.length - 1]);
      for (const window of windows)
        expect(tok.pair(query, window, 512).ids.length).toBe(query.length + window.length + 3);
    });

    it('returns a document that fits as its only window', () => {
      const query = tok.encode('what is this');
      const doc = tok.encode('a short document');
      const windows = chunkPair(query, doc, 512, tok.pairSpecials, options);
      expect(windows).toHaveLength(1);
      expect(windows[0]).toBe(doc);
      const exact = new Int32Array(509 - query.length).fill(1000);
      expect(chunkPair(query, exact, 512, tok.pairSpecials, options)[0]).toBe(exact);
      expect(chunkPair(query, new Int32Array(0), 512, tok.pairSpecials, options)).toHaveLength(1);
    });
  });
});

describe('chunkPair', () => {
  const doc = Int32Array.from({ length: 1000 }, (_, i) => i);
  const query = new Int32Array(10).fill(-1);

  it('cuts windows of maxTokens - specials - query tokens with the given overlap, first ones only', () => {
    // room 97, window 87, step 77
    const windows = chunkPair(query, doc, 100, 3, { overlap: 10, maxChunks: 5 });
    expect(windows.map((w) => [w[0], w.length])).toEqual([
      [0, 87],
      [77, 87],
      [154, 87],
      [231, 87],
      [308, 87],
    ]);
    const all = chunkPair(query, doc, 100, 3, { overlap: 10, maxChunks: 100 });
    expect(all).toHaveLength(13);
    expect(all[12]![all[12]!.length - 1]).toBe(999);
    expect(all[11]![all[11]!.length - 1]).toBeLessThan(999);
    expect(chunkPair(query, doc, 100, 3, { overlap: 0, maxChunks: 100 }).map((w) => w[0])).toEqual(
      Array.from({ length: 12 }, (_, i) => i * 87),
    );
  });

  it('caps a long query at half the room (rounded up), so that pair() keeps every window whole', () => {
    const longQuery = new Int32Array(80).fill(-1);
    // room 97: the query keeps 49, windows are 48
    const windows = chunkPair(longQuery, doc, 100, 3, { overlap: 8, maxChunks: 3 });
    expect(windows.map((w) => w.length)).toEqual([48, 48, 48]);
    for (const w of windows) expect(longestFirst(longQuery.length, w.length, 97)).toEqual([49, 48]);
    // A higher cap leaves shorter windows; pair() then cuts the query to exactly the cap.
    const capped = chunkPair(longQuery, doc, 100, 3, { overlap: 8, maxChunks: 1, maxQueryTokens: 60 });
    expect(capped[0]!.length).toBe(37);
    expect(longestFirst(longQuery.length, 37, 97)).toEqual([60, 37]);
  });

  it('rejects settings that pair() could not honour', () => {
    expect(() => chunkPair(query, doc, 100, 3, { overlap: 0, maxChunks: 1, maxQueryTokens: 48 })).toThrow(RangeError);
    expect(() => chunkPair(query, doc, 100, 3, { overlap: 48, maxChunks: 1 })).toThrow(RangeError);
    expect(() => chunkPair(query, doc, 100, 3, { overlap: -1, maxChunks: 1 })).toThrow(RangeError);
    expect(() => chunkPair(query, doc, 100, 3, { overlap: 0, maxChunks: 0 })).toThrow(RangeError);
    expect(() => chunkPair(query, doc, 4, 3, { overlap: 0, maxChunks: 1 })).toThrow(RangeError);
  });
});

describe('longestFirst', () => {
  it('matches HF tokenizers truncate_encodings (max_length 7)', () => {
    // The cases of tokenizers/src/utils/truncation.rs, lengths 0, 2, 4 and 8.
    const cases: [number, number, number, number][] = [
      [0, 0, 0, 0],
      [0, 2, 0, 2],
      [0, 4, 0, 4],
      [0, 8, 0, 7],
      [2, 0, 2, 0],
      [2, 2, 2, 2],
      [2, 4, 2, 4],
      [2, 8, 2, 5],
      [4, 0, 4, 0],
      [4, 2, 4, 2],
      [4, 4, 3, 4],
      [4, 8, 3, 4],
      [8, 0, 7, 0],
      [8, 2, 5, 2],
      [8, 4, 4, 3],
      [8, 8, 3, 4],
    ];
    for (const [a, b, keptA, keptB] of cases) expect(longestFirst(a, b, 7), `${a}, ${b}`).toEqual([keptA, keptB]);
  });

  it('keeps a short first sequence whole and gives the rest to the second', () => {
    expect(longestFirst(8, 843, 509)).toEqual([8, 501]);
    expect(longestFirst(843, 8, 509)).toEqual([501, 8]);
    expect(longestFirst(300, 300, 0)).toEqual([0, 0]);
  });
});

/** A small WordPiece tokenizer.json with the given post-processor. */
function wordPieceJson(postProcessor: unknown): object {
  const vocab = ['<s>', '<pad>', '</s>', '<unk>', 'hello', 'world', '##s', '[CLS]', '[SEP]'];
  return {
    version: '1.0',
    added_tokens: ['<s>', '<pad>', '</s>', '<unk>'].map((content, id) => ({
      id,
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: {
      type: 'BertNormalizer',
      clean_text: true,
      handle_chinese_chars: true,
      strip_accents: null,
      lowercase: true,
    },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: postProcessor,
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: {
      type: 'WordPiece',
      unk_token: '<unk>',
      continuing_subword_prefix: '##',
      max_input_chars_per_word: 100,
      vocab: Object.fromEntries(vocab.map((token, id) => [token, id])),
    },
  };
}

describe('special-token templates', () => {
  it('reads RobertaProcessing: <s> A </s></s> B </s>, every type id 0', () => {
    const tok = TextTokenizer.fromJson(
      wordPieceJson({
        type: 'RobertaProcessing',
        sep: ['</s>', 2],
        cls: ['<s>', 0],
        trim_offsets: true,
        add_prefix_space: false,
      }),
      { pad_token: '<pad>' },
    );
    expect(tok.singleSpecials).toBe(2);
    expect(tok.pairSpecials).toBe(4);
    expect(tok.padId).toBe(1);
    const content = tok.encode('Hello worlds');
    expect(Array.from(content)).toEqual([4, 5, 6]);
    expect(Array.from(tok.single(content, 512))).toEqual([0, 4, 5, 6, 2]);
    expect(Array.from(tok.single(content, 4))).toEqual([0, 4, 5, 2]);
    const { ids, typeIds } = tok.pair(tok.encode('hello'), content, 512);
    expect(Array.from(ids)).toEqual([0, 4, 2, 2, 4, 5, 6, 2]);
    expect(Array.from(typeIds)).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
    expect(Array.from(tok.pair(tok.encode('hello'), content, 6).ids)).toEqual([0, 4, 2, 2, 4, 2]);
  });

  it('adds nothing without a post-processor, the second sequence still type 1', () => {
    const tok = TextTokenizer.fromJson(wordPieceJson(null));
    expect(tok.singleSpecials).toBe(0);
    expect(tok.pairSpecials).toBe(0);
    expect(tok.padId).toBe(0);
    const content = tok.encode('hello worlds');
    expect(Array.from(tok.single(content, 512))).toEqual([4, 5, 6]);
    expect(Array.from(tok.single(content, 2))).toEqual([4, 5]);
    const { ids, typeIds } = tok.pair(tok.encode('world'), content, 512);
    expect(Array.from(ids)).toEqual([5, 4, 5, 6]);
    expect(Array.from(typeIds)).toEqual([0, 1, 1, 1]);
  });

  it('reads BertProcessing, a Sequence holding one template, and padding.pad_id', () => {
    const bert = TextTokenizer.fromJson({
      ...wordPieceJson({ type: 'BertProcessing', sep: ['[SEP]', 8], cls: ['[CLS]', 7] }),
      padding: { pad_id: 1 },
    });
    expect(bert.padId).toBe(1);
    const { ids, typeIds } = bert.pair(bert.encode('hello'), bert.encode('world'), 512);
    expect(Array.from(ids)).toEqual([7, 4, 8, 5, 8]);
    expect(Array.from(typeIds)).toEqual([0, 0, 0, 1, 1]);

    const template = {
      type: 'TemplateProcessing',
      single: [
        { SpecialToken: { id: '<s>', type_id: 0 } },
        { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: '</s>', type_id: 0 } },
      ],
      pair: [
        { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: '</s>', type_id: 0 } },
        { Sequence: { id: 'B', type_id: 1 } },
        { SpecialToken: { id: '</s>', type_id: 1 } },
      ],
      special_tokens: {
        '<s>': { id: '<s>', ids: [0], tokens: ['<s>'] },
        '</s>': { id: '</s>', ids: [2], tokens: ['</s>'] },
      },
    };
    const seq = TextTokenizer.fromJson(
      wordPieceJson({ type: 'Sequence', processors: [{ type: 'ByteLevel', trim_offsets: false }, template] }),
    );
    expect([seq.singleSpecials, seq.pairSpecials]).toEqual([2, 2]);
    expect(Array.from(seq.single(seq.encode('hello'), 512))).toEqual([0, 4, 2]);
    const pair = seq.pair(seq.encode('hello'), seq.encode('world'), 512);
    expect(Array.from(pair.ids)).toEqual([4, 2, 5, 2]);
    expect(Array.from(pair.typeIds)).toEqual([0, 0, 1, 1]);
  });

  it('rejects post-processors it cannot read', () => {
    expect(() => readTemplate({ type: 'Unknown' })).toThrow(/unsupported/);
    expect(() =>
      readTemplate({
        type: 'TemplateProcessing',
        single: [{ Sequence: { id: 'A', type_id: 0 } }],
        pair: [{ Sequence: { id: 'B', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
      }),
    ).toThrow(/order/);
    expect(() =>
      readTemplate({
        type: 'TemplateProcessing',
        single: [{ SpecialToken: { id: 'X', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
        pair: [],
      }),
    ).toThrow(/X/);
  });
});

describe('patches of @huggingface/tokenizers', () => {
  it('each applies to the installed library and is on the path of its encode', () => {
    expect(() => checkLibraryPatches()).not.toThrow();
  });

  it('patch a BERT tokenizer.json: its normalizer and WordPiece', () => {
    const json = {
      model: {
        type: 'WordPiece',
        unk_token: '[UNK]',
        continuing_subword_prefix: '##',
        max_input_chars_per_word: 100,
        vocab: { '[UNK]': 0, a: 1 },
      },
    };
    const bert = {
      ...json,
      normalizer: {
        type: 'BertNormalizer',
        clean_text: true,
        handle_chinese_chars: true,
        strip_accents: null,
        lowercase: true,
      },
      pre_tokenizer: { type: 'BertPreTokenizer' },
    };
    const base = {
      version: '1.0',
      added_tokens: [],
      normalizer: null,
      pre_tokenizer: null,
      post_processor: null,
      decoder: null,
    };
    expect(loadLibraryTokenizer({ ...base, ...bert }, {}).patched).toEqual({
      bertNormalizer: 1,
      lowercase: 0,
      precompiled: 0,
      byteLevel: 0,
      wordPiece: 1,
      unigram: 0,
    });
  });
});
