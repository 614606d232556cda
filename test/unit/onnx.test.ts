import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  attr,
  createGraph,
  createModel,
  initializerToFloat32,
  node,
  readModel,
  tensorFromFloat32,
  toBigInt,
  toNumber,
  valueInfo,
  writeModel,
} from '../../src/onnx/model.js';
import { DataType } from '../../src/onnx/proto.js';
import { UNKNOWN_FIELDS, unknownFields } from '../../src/onnx/unknown-fields.js';
import { TINY_BERT, TINY_VOCAB, writeTinyModels, type TinyModelPaths } from '../fixtures/tiny-models.js';
import { ShippedTokenizer } from '../../src/text/library-patches.js';
import { output } from '../helpers/ort.js';
import { missing } from '../helpers/resources.js';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const modelsDir = resolve(repoRoot, process.env.ONNX_GATEWAY_MODELS_DIR ?? '.data/models');
const realModel = join(modelsDir, 'synthetic-all-MiniLM-L6-v2', 'onnx', 'model.onnx');
const hasRealModel = !missing(
  existsSync(realModel),
  `${realModel} is missing: generate it with: python3 ../shared/models/synthetic/make_models.py --out .data/models`,
);

const H = TINY_BERT.hidden;
const id = (token: string) => {
  const i = TINY_VOCAB.indexOf(token);
  if (i < 0) throw new Error(`${token} is not in the tiny vocabulary`);
  return i;
};
const CLS = id('[CLS]');
const SEP = id('[SEP]');
const PAD = id('[PAD]');

/** int64 feeds for rows of ids, right-padded with [PAD] / mask 0. */
function feeds(rows: number[][], typeRows?: number[][], withTokenTypes = true): Record<string, ort.Tensor> {
  const seq = Math.max(...rows.map((r) => r.length));
  const ids = new BigInt64Array(rows.length * seq).fill(BigInt(PAD));
  const mask = new BigInt64Array(rows.length * seq);
  const types = new BigInt64Array(rows.length * seq);
  rows.forEach((row, r) =>
    row.forEach((tok, j) => {
      ids[r * seq + j] = BigInt(tok);
      mask[r * seq + j] = 1n;
      types[r * seq + j] = BigInt(typeRows?.[r]?.[j] ?? 0);
    }),
  );
  const dims = [rows.length, seq];
  return {
    input_ids: new ort.Tensor('int64', ids, dims),
    attention_mask: new ort.Tensor('int64', mask, dims),
    ...(withTokenTypes ? { token_type_ids: new ort.Tensor('int64', types, dims) } : {}),
  };
}

const data = (t: ort.Tensor) => t.data as Float32Array;

const hidden = (result: ort.InferenceSession.ReturnType) => output(result, 'last_hidden_state');
const logits = (result: ort.InferenceSession.ReturnType) => output(result, 'logits');

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i]! - b[i]!));
  return d;
}

/** Rows [0, n) x all columns of batch row `r` of a [B, S, H] output. */
const tokens = (t: ort.Tensor, r: number, n: number) => {
  const [, s, h] = t.dims as readonly [number, number, number];
  return data(t).subarray(r * s * h, (r * s + n) * h);
};
const row = (t: ort.Tensor, r: number) => {
  const w = t.dims.at(-1)!;
  return data(t).subarray(r * w, (r + 1) * w);
};

const short = [CLS, id('hello'), id('world'), SEP];
const long = [
  CLS,
  id('what'),
  id('is'),
  id('the'),
  id('capital'),
  id('of'),
  id('france'),
  id('?'),
  id('paris'),
  id('##s'),
  SEP,
];

describe('tiny models', () => {
  let dir: string;
  let paths: TinyModelPaths;
  let sessions: Record<keyof TinyModelPaths, ort.InferenceSession>;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'onnx-gateway-tiny-'));
    paths = await writeTinyModels(dir);
    const open = (kind: keyof TinyModelPaths) => ort.InferenceSession.create(join(paths[kind], 'onnx', 'model.onnx'));
    sessions = {
      embedder: await open('embedder'),
      embedderSentence: await open('embedderSentence'),
      reranker: await open('reranker'),
    };
  });

  afterAll(async () => {
    if (sessions) await Promise.all(Object.values(sessions).map((s) => s.release()));
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('are generated deterministically', async () => {
    const again = await mkdtemp(join(tmpdir(), 'onnx-gateway-tiny-'));
    try {
      const second = await writeTinyModels(again);
      for (const kind of ['embedder', 'embedderSentence', 'reranker'] as const) {
        for (const file of ['onnx/model.onnx', 'tokenizer.json', 'config.json', 'tokenizer_config.json']) {
          const [a, b] = await Promise.all([readFile(join(second[kind], file)), readFile(join(paths[kind], file))]);
          expect(a.equals(b), `${kind}/${file}`).toBe(true);
        }
      }
    } finally {
      await rm(again, { recursive: true, force: true });
    }
  });

  it('write Hugging Face style folders', async () => {
    const config = JSON.parse(await readFile(join(paths.embedder, 'config.json'), 'utf8')) as Record<string, unknown>;
    expect(config).toMatchObject({
      model_type: 'bert',
      hidden_size: H,
      num_hidden_layers: TINY_BERT.layers,
      num_attention_heads: TINY_BERT.heads,
      max_position_embeddings: TINY_BERT.maxPositions,
      vocab_size: TINY_VOCAB.length,
    });
    const reranker = JSON.parse(await readFile(join(paths.reranker, 'config.json'), 'utf8')) as {
      architectures?: string[];
    };
    expect(reranker.architectures).toEqual(['BertForSequenceClassification']);
    const tokConfig = JSON.parse(await readFile(join(paths.embedder, 'tokenizer_config.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(tokConfig).toMatchObject({ model_max_length: 64, do_lower_case: true });
  });

  it('declare the expected inputs and outputs', () => {
    expect(sessions.embedder.inputNames).toEqual(['input_ids', 'attention_mask', 'token_type_ids']);
    expect(sessions.embedder.outputNames).toEqual(['last_hidden_state']);
    expect(sessions.embedderSentence.inputNames).toEqual(['input_ids', 'attention_mask']);
    expect(sessions.embedderSentence.outputNames).toEqual(['last_hidden_state', 'sentence_embedding']);
    expect(sessions.reranker.inputNames).toEqual(['input_ids', 'attention_mask', 'token_type_ids']);
    expect(sessions.reranker.outputNames).toEqual(['logits']);
  });

  it('embedder: shapes, and padding does not change a row', async () => {
    const batch = await sessions.embedder.run(feeds([short, long]));
    expect(hidden(batch).dims).toEqual([2, long.length, H]);
    const alone = await sessions.embedder.run(feeds([short]));
    expect(hidden(alone).dims).toEqual([1, short.length, H]);
    expect(
      maxAbsDiff(tokens(hidden(alone), 0, short.length), tokens(hidden(batch), 0, short.length)),
    ).toBeLessThanOrEqual(1e-5);
    const longAlone = await sessions.embedder.run(feeds([long]));
    expect(maxAbsDiff(data(hidden(longAlone)), tokens(hidden(batch), 1, long.length))).toBeLessThanOrEqual(1e-5);
  });

  it('embedder: tokens, positions and token types all matter', async () => {
    const base = await sessions.embedder.run(feeds([short]));
    const swapped = await sessions.embedder.run(feeds([[CLS, id('world'), id('hello'), SEP]]));
    const other = await sessions.embedder.run(feeds([[CLS, id('hello'), id('paris'), SEP]]));
    const typed = await sessions.embedder.run(feeds([short], [[0, 0, 1, 1]]));
    // "hello" at position 1 vs position 2: same token, different position
    const helloAt1 = tokens(hidden(base), 0, 2).subarray(H);
    const helloAt2 = tokens(hidden(swapped), 0, 3).subarray(2 * H);
    expect(maxAbsDiff(helloAt1, helloAt2)).toBeGreaterThan(0.1);
    expect(maxAbsDiff(data(hidden(base)), data(hidden(other)))).toBeGreaterThan(0.1);
    expect(maxAbsDiff(data(hidden(base)), data(hidden(typed)))).toBeGreaterThan(0.1);
    for (const v of data(hidden(base))) expect(Number.isFinite(v)).toBe(true);
  });

  it('sentence variant: same encoder, token type 0, in-graph mean pooling', async () => {
    const plain = await sessions.embedder.run(feeds([short, long]));
    const out = await sessions.embedderSentence.run(feeds([short, long], undefined, false));
    expect(output(out, 'sentence_embedding').dims).toEqual([2, H]);
    expect(maxAbsDiff(data(hidden(out)), data(hidden(plain)))).toBeLessThanOrEqual(1e-5);
    [short, long].forEach((ids, r) => {
      const mean = new Float32Array(H);
      const toks = tokens(hidden(out), r, ids.length);
      for (let j = 0; j < ids.length; j++) for (let k = 0; k < H; k++) mean[k]! += toks[j * H + k]! / ids.length;
      expect(maxAbsDiff(mean, row(output(out, 'sentence_embedding'), r))).toBeLessThanOrEqual(1e-5);
    });
    const alone = await sessions.embedderSentence.run(feeds([short], undefined, false));
    expect(
      maxAbsDiff(row(output(alone, 'sentence_embedding'), 0), row(output(out, 'sentence_embedding'), 0)),
    ).toBeLessThanOrEqual(1e-5);
  });

  it('reranker: logits per pair, independent of padding, sensitive to token types', async () => {
    const pair = [CLS, id('capital'), id('?'), SEP, id('paris'), id('city'), SEP];
    const pairTypes = [0, 0, 0, 0, 1, 1, 1];
    const longPair = [...pair.slice(0, -1), id('of'), id('france'), id('and'), id('the'), id('world'), SEP];
    const longTypes = [...pairTypes, 1, 1, 1, 1, 1];
    const batch = await sessions.reranker.run(feeds([pair, longPair], [pairTypes, longTypes]));
    expect(logits(batch).dims).toEqual([2, 1]);
    const alone = await sessions.reranker.run(feeds([pair], [pairTypes]));
    expect(Math.abs(data(logits(alone))[0]! - data(logits(batch))[0]!)).toBeLessThanOrEqual(1e-5);
    expect(Math.abs(data(logits(batch))[0]! - data(logits(batch))[1]!)).toBeGreaterThan(1e-3);
    const untyped = await sessions.reranker.run(feeds([pair]));
    expect(Math.abs(data(logits(alone))[0]! - data(logits(untyped))[0]!)).toBeGreaterThan(1e-3);
  });

  it('ship a BERT WordPiece tokenizer.json that @huggingface/tokenizers loads', async () => {
    const json = JSON.parse(await readFile(join(paths.embedder, 'tokenizer.json'), 'utf8')) as object;
    const config = JSON.parse(await readFile(join(paths.embedder, 'tokenizer_config.json'), 'utf8')) as object;
    const tokenizer = new ShippedTokenizer(json, config);
    expect(tokenizer.encode('Hello, world!').ids).toEqual([CLS, id('hello'), id(','), id('world'), id('!'), SEP]);
    expect(tokenizer.tokenize('Zebra 42')).toEqual(['z', '##e', '##b', '##r', '##a', '4', '##2']);
    expect(tokenizer.encode('naïve ☃').ids).toEqual([
      CLS,
      id('n'),
      id('##a'),
      id('##i'),
      id('##v'),
      id('##e'),
      id('[UNK]'),
      SEP,
    ]);
    const pair = tokenizer.encode('what is it', { text_pair: 'a dog', return_token_type_ids: true });
    expect(pair.ids).toEqual([CLS, id('what'), id('is'), id('it'), SEP, id('a'), id('dog'), SEP]);
    expect(pair.token_type_ids).toEqual([0, 0, 0, 0, 0, 1, 1, 1]);
    expect(tokenizer.decode(pair.ids, { skip_special_tokens: true })).toBe('what is it a dog');
  });

  it('round trip through readModel/writeModel unchanged', async () => {
    const file = join(paths.reranker, 'onnx', 'model.onnx');
    const bytes = await readFile(file);
    const rewritten = writeModel(readModel(bytes));
    expect(Buffer.from(rewritten).equals(bytes)).toBe(true);
    const session = await ort.InferenceSession.create(rewritten);
    try {
      const input = () => feeds([short, long]);
      const a = await sessions.reranker.run(input());
      const b = await session.run(input());
      expect(maxAbsDiff(data(logits(a)), data(logits(b)))).toBe(0);
    } finally {
      await session.release();
    }
  });
});

describe('onnx model layer', () => {
  it('builds a model ONNX Runtime runs', async () => {
    const w = tensorFromFloat32('w', [2, 3], Float32Array.from([1, 2, 3, 4, 5, 6]));
    const model = createModel(
      createGraph({
        name: 'g',
        nodes: [
          node('MatMul', ['x', 'w'], ['y0'], [], '', 'mm'),
          node('Softmax', ['y0'], ['y'], [attr.int('axis', -1)]),
        ],
        inputs: [valueInfo('x', DataType.FLOAT, ['n', 2])],
        outputs: [valueInfo('y', DataType.FLOAT, ['n', 3])],
        initializers: [w],
      }),
    );
    const session = await ort.InferenceSession.create(writeModel(model));
    const y = output(await session.run({ x: new ort.Tensor('float32', Float32Array.from([1, 0, 0, 0]), [2, 2]) }), 'y');
    await session.release();
    expect(y.dims).toEqual([2, 3]);
    const e = [Math.exp(1), Math.exp(2), Math.exp(3)];
    const sum = e[0]! + e[1]! + e[2]!;
    expect(
      maxAbsDiff(
        data(y).subarray(0, 3),
        e.map((v) => v / sum),
      ),
    ).toBeLessThan(1e-6);
    expect(Array.from(data(y).subarray(3))).toEqual([1 / 3, 1 / 3, 1 / 3].map(Math.fround));
  });

  it('reads tensors from raw_data and float_data', () => {
    const t = readModel(
      writeModel(
        createModel(
          createGraph({
            name: 'g',
            nodes: [],
            inputs: [],
            outputs: [],
            initializers: [
              tensorFromFloat32('raw', [3], Float32Array.from([1.5, -2, 3])),
              { name: 'packed', dataType: DataType.FLOAT, dims: [2], floatData: [0.25, 7] },
            ],
          }),
        ),
      ),
    ).graph!.initializer!;
    expect(Array.from(initializerToFloat32(t[0]!))).toEqual([1.5, -2, 3]);
    expect(t[0]!.dims!.map(toNumber)).toEqual([3]);
    expect(Array.from(initializerToFloat32(t[1]!))).toEqual([0.25, 7]);
    expect(() => initializerToFloat32({ ...t[0], dataType: DataType.INT64 })).toThrow(/not FLOAT/);
  });

  it('keeps int64 values exact, INT64_MAX included', () => {
    const big = 2n ** 63n - 1n;
    const model = createModel(
      createGraph({
        name: 'g',
        nodes: [node('Slice', ['x', 's', 'e'], ['y'], [attr.ints('axes', [0, -1, big])])],
        inputs: [],
        outputs: [],
      }),
    );
    const ints = readModel(writeModel(model)).graph!.node![0]!.attribute![0]!.ints!;
    expect(ints.map(toBigInt)).toEqual([0n, -1n, big]);
    expect(toNumber(ints[1])).toBe(-1);
    expect(() => toNumber(ints[2])).toThrow(RangeError);
  });

  it('keeps fields the schema does not declare', () => {
    const model = createModel(
      createGraph({ name: 'g', nodes: [node('Identity', ['x'], ['y'])], inputs: [], outputs: [] }),
    );
    // NodeProto field 99 (bytes "hi"), and ModelProto fields 20 (an empty
    // training_info message) and 98 (varint 2^64 - 1: needs all 64 bits).
    const nodeField = Uint8Array.from([0x9a, 0x06, 2, 0x68, 0x69]);
    Object.assign(model.graph!.node![0]!, { [UNKNOWN_FIELDS]: [nodeField] });
    const bytes = writeModel(model);
    const modelFields = [
      Uint8Array.from([0xa2, 0x01, 0]),
      Uint8Array.from([0x90, 0x06, ...Array<number>(9).fill(0xff), 0x01]),
    ];
    const extended = Buffer.concat([bytes, ...modelFields]);

    const read = readModel(extended);
    expect(unknownFields(read)).toEqual(modelFields);
    expect(unknownFields(read.graph!.node![0]!)).toEqual([nodeField]);
    expect(unknownFields(read.graph!)).toEqual([]);
    expect(Buffer.from(writeModel(read)).equals(extended)).toBe(true);
  });

  it.skipIf(!hasRealModel)(
    `round trips the real-size synthetic MiniLM model${hasRealModel ? '' : ' (missing: generate with: python3 ../shared/models/synthetic/make_models.py --out .data/models)'}`,
    async () => {
      const bytes = await readFile(realModel);
      const model = readModel(bytes);
      expect(model.graph!.initializer!.length).toBeGreaterThan(100);
      const rewritten = writeModel(model);
      // A second pass must reproduce our own encoding byte for byte.
      expect(Buffer.from(writeModel(readModel(rewritten))).equals(Buffer.from(rewritten))).toBe(true);

      const ids = [101, 7592, 1010, 2088, 999, 102];
      const input = () => feeds([ids, ids.slice(0, 3).concat(102)]);
      const original = await ort.InferenceSession.create(bytes);
      const copy = await ort.InferenceSession.create(rewritten);
      try {
        const a = await original.run(input());
        const b = await copy.run(input());
        expect(hidden(b).dims).toEqual([2, 6, 384]);
        expect(maxAbsDiff(data(hidden(a)), data(hidden(b)))).toBe(0);
      } finally {
        await Promise.all([original.release(), copy.release()]);
      }
    },
  );
});
