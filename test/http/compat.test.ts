/**
 * The compatibility routes (TEI, Cohere v2, Ollama) on a real server: each answers in its API's
 * shape what /v1 answers for the same input. What they refuse, and how, is in
 * compat-validation.test.ts, over a fake core.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from '../../src/main.js';
import { DEFAULT_CALIBRATION_FILE, readCalibrationTexts } from '../../src/models/calibration-text.js';
import { calibrationRanges, quantize } from '../../src/vectors/index.js';
import { floatVectors, type EmbeddingList, type ErrorBody, type RerankList } from '../helpers/bodies.js';
import { dataUri, encoded } from '../helpers/image-bytes.js';
import { auth, startServer } from '../helpers/server.js';

/** Cohere's v2 embed answer, with the embedding types this file asks for. */
interface CohereEmbedList {
  id: string;
  response_type: string;
  texts: string[];
  embeddings: { float: number[][]; base64: string[]; ubinary: number[][] };
  meta: unknown;
}
interface CohereRerankList {
  id: string;
  results: { index: number; relevance_score: number }[];
  meta: unknown;
}
interface TeiInfo {
  version: string;
  max_batch_tokens: number;
}
interface OllamaEmbed {
  model: string;
  embeddings: number[][];
  total_duration: number;
  load_duration: number;
  prompt_eval_count: number;
}
interface OllamaTags {
  models: {
    name: string;
    model: string;
    size: number;
    digest: string;
    modified_at: string;
    details: { parameter_size: string };
  }[];
}

let server: Server;
beforeAll(async () => {
  server = await startServer();
});
afterAll(() => server?.close());

const post = (url: string, body: unknown, headers: Record<string, string> = auth) =>
  server.app.inject({ method: 'POST', url, payload: body as object, headers });
const get = (url: string, headers: Record<string, string> = auth) => server.app.inject({ method: 'GET', url, headers });

const norm = (v: number[]) => Math.hypot(...v);
const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));
const v1Vectors = async (input: string | string[]) =>
  floatVectors((await post('/v1/embeddings', { model: 'tiny-embedder', input })).json<EmbeddingList>());

function expectClose(actual: number[], expected: number[], digits = 5) {
  expect(actual).toHaveLength(expected.length);
  actual.forEach((x, i) => expect(x).toBeCloseTo(expected[i]!, digits));
}

describe('TEI POST /embed', () => {
  it('answers a bare array of normalised vectors, the same as /v1/embeddings', async () => {
    const res = await post('/embed', { inputs: ['hello world', 'the quick brown fox'] });
    expect(res.statusCode).toBe(200);
    const vectors: number[][] = res.json();
    expect(vectors).toHaveLength(2);
    expect(norm(vectors[0]!)).toBeCloseTo(1, 5);
    const reference = await v1Vectors(['hello world', 'the quick brown fox']);
    expectClose(vectors[0]!, reference[0]!);
    expectClose(vectors[1]!, reference[1]!);
    expect(res.headers['server-timing']).toMatch(/inference;dur=/);
  });

  it('takes a single string, and POST / is /embed as on a TEI embedding server', async () => {
    const one = (await post('/embed', { inputs: 'hello world' })).json<number[][]>();
    expect(one).toHaveLength(1);
    const root = await post('/', { inputs: 'hello world' });
    expect(root.statusCode).toBe(200);
    expectClose(root.json<number[][]>()[0]!, one[0]!);
  });

  it('answers the pooled vector with normalize: false', async () => {
    const raw: number[] = (await post('/embed', { inputs: 'hello world', normalize: false })).json<number[][]>()[0]!;
    const unit: number[] = (await post('/embed', { inputs: 'hello world' })).json<number[][]>()[0]!;
    expect(Math.abs(norm(raw) - 1)).toBeGreaterThan(1e-3);
    expectClose(
      raw.map((x) => x / norm(raw)),
      unit,
    );
  });

  it('cuts dimensions and accepts token ids', async () => {
    const cut: number[] = (await post('/embed', { inputs: 'hello world', dimensions: 8 })).json<number[][]>()[0]!;
    expect(cut).toHaveLength(8);
    expect(norm(cut)).toBeCloseTo(1, 5);
    const ids = (await post('/embed', { inputs: [[7, 8, 9], [10]] })).json<number[][]>();
    expect(ids).toHaveLength(2);
  });

  it('cuts a long input from the left with truncation_direction Left, and refuses it with truncate: false', async () => {
    const text =
      Array.from({ length: 80 }, (_, i) => ['hello', 'world', 'paris', 'city'][i % 4]).join(' ') + ' the lazy dog';
    const tokens: { id: number }[] = (await post('/tokenize', { inputs: text, add_special_tokens: false })).json<
      { id: number }[][]
    >()[0]!;
    const lastIds = tokens.slice(-62).map((t) => t.id);
    const left: number[] = (await post('/embed', { inputs: text, truncation_direction: 'Left' })).json<
      number[][]
    >()[0]!;
    const right: number[] = (await post('/embed', { inputs: text, truncation_direction: 'right' })).json<
      number[][]
    >()[0]!;
    const tail: number[] = (await post('/embed', { inputs: [lastIds] })).json<number[][]>()[0]!;
    expectClose(left, tail);
    expect(right).not.toEqual(left);

    const refused = await post('/embed', { inputs: text, truncate: false });
    expect(refused.statusCode).toBe(422);
    expect(refused.json()).toMatchObject({ error_type: 'Validation', code: 'input_too_long' });
  });
});

/** Whether bit `d` of a row packed big-endian, 8 dimensions to a byte, is set. */
const bit = (bytes: number[], d: number) => ((bytes[d >> 3]! & 0xff) >> (7 - (d & 7))) & 1;

describe('quantized embeddings: encoding_format int8, uint8, binary, ubinary on /v1/embeddings', () => {
  const texts = ['hello world', 'the quick brown fox', 'paris'];
  const vectorsOf = async (format: string, dimensions?: number) => {
    const res = await post('/v1/embeddings', {
      model: 'tiny-embedder',
      input: texts,
      encoding_format: format,
      dimensions,
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json<EmbeddingList>().data.map((d) => d.embedding as number[]);
  };

  it('answers ubinary with a bit per dimension that is the sign of the float component, binary as the byte minus 128', async () => {
    for (const dimensions of [undefined, 12]) {
      const floats = await vectorsOf('float', dimensions);
      const ubinary = await vectorsOf('ubinary', dimensions);
      const binary = await vectorsOf('binary', dimensions);
      floats.forEach((float, row) => {
        expect(ubinary[row]).toHaveLength(Math.ceil(float.length / 8));
        float.forEach((x, d) => expect(bit(ubinary[row]!, d), `row ${row} dimension ${d}`).toBe(x > 0 ? 1 : 0));
        // The padding bits of a width that is no multiple of 8 are 0.
        for (let d = float.length; d < ubinary[row]!.length * 8; d++) expect(bit(ubinary[row]!, d)).toBe(0);
        expect(binary[row]).toEqual(ubinary[row]!.map((byte) => byte - 128));
      });
    }
  });

  it('answers int8 and uint8 over the ranges of the shipped calibration text, embedded as the request is (after the dimensions cut)', async () => {
    const calibration = readCalibrationTexts(readFileSync(DEFAULT_CALIBRATION_FILE, 'utf8'));
    for (const dimensions of [undefined, 8]) {
      const res = await post('/v1/embeddings', { model: 'tiny-embedder', input: calibration, dimensions });
      const rows = Float32Array.from(floatVectors(res.json<EmbeddingList>()).flat());
      const width = rows.length / calibration.length;
      const ranges = calibrationRanges(rows, width);
      const floats = Float32Array.from((await vectorsOf('float', dimensions)).flat());
      for (const precision of ['int8', 'uint8'] as const) {
        const answered = (await vectorsOf(precision, dimensions)).flat();
        expect(answered, `${precision} ${dimensions}`).toEqual(Array.from(quantize(floats, width, precision, ranges)));
        expect(Math.min(...answered)).toBeGreaterThanOrEqual(precision === 'int8' ? -128 : 0);
        expect(Math.max(...answered)).toBeLessThanOrEqual(precision === 'int8' ? 127 : 255);
      }
    }
  });
});

describe('Cohere POST /v2/embed', () => {
  it("answers every requested type in Cohere v2's shape, from the vectors of /v1", async () => {
    const res = await post('/v2/embed', {
      model: 'tiny-embedder',
      texts: ['hello world', 'paris'],
      input_type: 'search_document',
      embedding_types: ['float', 'base64', 'ubinary'],
    });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json<CohereEmbedList>();
    expect(Object.keys(body).sort()).toEqual(['embeddings', 'id', 'meta', 'response_type', 'texts']);
    expect(body.response_type).toBe('embeddings_by_type');
    expect(Object.keys(body.embeddings).sort()).toEqual(['base64', 'float', 'ubinary']);
    expect(body.texts).toEqual(['hello world', 'paris']);
    expect(body.meta).toEqual({ api_version: { version: '2' }, billed_units: { input_tokens: 4 + 3 } });
    const reference = await v1Vectors(['hello world', 'paris']);
    expectClose(body.embeddings.float[1]!, reference[1]!);
    const decoded = new Float32Array(Uint8Array.from(Buffer.from(body.embeddings.base64[0]!, 'base64')).buffer);
    expectClose(Array.from(decoded), reference[0]!);
  });

  it('takes inputs of text parts, output_dimension and truncate, and refuses images for a text model and NONE over the window', async () => {
    const parts = await post('/v2/embed', {
      model: 'tiny-embedder',
      inputs: [{ content: [{ type: 'text', text: 'hello world' }] }],
      output_dimension: 8,
    });
    expect(parts.statusCode, parts.body).toBe(200);
    expect(parts.json<CohereEmbedList>().embeddings.float[0]).toHaveLength(8);
    const long = 'word '.repeat(200);
    expect(
      (await post('/v2/embed', { model: 'tiny-embedder', texts: [long], truncate: 'NONE' })).json<ErrorBody>().error
        .code,
    ).toBe('input_too_long');
    expect((await post('/v2/embed', { model: 'tiny-embedder', texts: [long], truncate: 'START' })).statusCode).toBe(
      200,
    );
    // A real image reaches core, which refuses it for a model without a vision tower; bytes that are no image do not.
    const png = dataUri(await encoded('png', 8, 8));
    expect(
      (await post('/v2/embed', { model: 'tiny-embedder', images: ['data:image/png;base64,AAAA'] })).json<ErrorBody>()
        .error.code,
    ).toBe('invalid_image');
    for (const body of [
      { model: 'tiny-embedder', images: [png], input_type: 'image' },
      { model: 'tiny-embedder', inputs: [{ content: [{ type: 'image_url', image_url: { url: png } }] }] },
      { model: 'tiny-embedder', texts: ['a'], max_tokens: 8 },
      { model: 'tiny-embedder', texts: ['a'], embedding_types: ['int4'] },
      { model: 'tiny-embedder' },
    ]) {
      const res = await post('/v2/embed', body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json<ErrorBody>().error.code).toBe('invalid_request');
    }
    expect((await post('/v2/embed', { model: 'embed-v4.0', texts: ['a'] })).statusCode).toBe(404);
  });
});

describe('TEI POST /similarity', () => {
  it('answers the cosine of the source sentence with each sentence, with the prompt and truncation parameters', async () => {
    const sentences = ['hello world', 'the quick brown fox', 'paris'];
    const res = await post('/similarity', {
      inputs: { source_sentence: 'hello world', sentences },
      parameters: { truncate: true, truncation_direction: 'Right' },
    });
    expect(res.statusCode, res.body).toBe(200);
    const scores: number[] = res.json();
    const [source, ...others] = await v1Vectors(['hello world', ...sentences]);
    const dot = (a: number[], b: number[]) => a.reduce((sum, x, i) => sum + x * b[i]!, 0);
    expectClose(
      scores,
      others.map((v) => dot(source!, v)),
    );
    expect(scores[0]).toBeCloseTo(1, 5);
    expect(res.headers['server-timing']).toMatch(/inference;dur=/);
  });
});

describe('TEI POST /rerank', () => {
  const texts = ['the cat sat on the mat', 'quantum field theory', 'cats and dogs'];

  it('answers [{index, score, text?}] sorted by score, as sigmoid or raw logits', async () => {
    const res = await post('/rerank', { query: 'cat', texts, return_text: true });
    expect(res.statusCode).toBe(200);
    const ranks: { index: number; score: number; text: string }[] = res.json();
    expect(ranks.map((r) => r.index).sort()).toEqual([0, 1, 2]);
    for (let i = 1; i < ranks.length; i++) expect(ranks[i - 1]!.score).toBeGreaterThanOrEqual(ranks[i]!.score);
    for (const r of ranks) expect(r.text).toBe(texts[r.index]);

    const raw: { index: number; score: number; text?: string }[] = (
      await post('/rerank', { query: 'cat', texts, raw_scores: true })
    ).json();
    expect(raw.map((r) => r.index)).toEqual(ranks.map((r) => r.index));
    raw.forEach((r, i) => expect(sigmoid(r.score)).toBeCloseTo(ranks[i]!.score, 5));
    expect(raw[0]!.text).toBeUndefined();

    const v1 = (await post('/v1/rerank', { query: 'cat', documents: texts })).json<RerankList>().results;
    expect(v1.map((r) => r.index)).toEqual(ranks.map((r) => r.index));
  });
});

describe('TEI POST /predict on a cross-encoder (no classifier served)', () => {
  it("answers a pair with the reranker's label and its /rerank score, and TEI's batch form", async () => {
    const texts = ['the cat sat on the mat', 'quantum field theory'];
    const ranks: { index: number; score: number }[] = (await post('/rerank', { query: 'cat', texts })).json();
    const score = (i: number) => ranks.find((r) => r.index === i)!.score;
    // The tiny reranker's config.json names its one label LABEL_0.
    const label = 'LABEL_0';
    const one = await post('/predict', { inputs: ['cat', texts[0]] });
    expect(one.statusCode, one.body).toBe(200);
    expect(one.json()).toEqual([{ label, score: expect.closeTo(score(0), 6) as unknown }]);
    const batch: { label: string; score: number }[][] = (
      await post('/predict', {
        inputs: [
          ['cat', texts[1]],
          ['cat', texts[0]],
        ],
      })
    ).json();
    expect(batch.map((p) => p[0]!.score)).toEqual([expect.closeTo(score(1), 6), expect.closeTo(score(0), 6)]);
    const raw: { score: number }[] = (await post('/predict', { inputs: ['cat', texts[0]], raw_scores: true })).json();
    expect(sigmoid(raw[0]!.score)).toBeCloseTo(score(0), 6);
  });
});

describe('TEI POST /tokenize and /decode', () => {
  it('answers token objects with special tokens and code point offsets into the input', async () => {
    const input = 'Héllo 👍 testing';
    const res = await post('/tokenize', { inputs: input });
    expect(res.statusCode).toBe(200);
    const [tokens] =
      res.json<{ id: number; text: string; special: boolean; start: number | null; stop: number | null }[][]>();
    expect(tokens![0]).toEqual({ id: 2, text: '[CLS]', special: true, start: null, stop: null });
    expect(tokens!.at(-1)).toMatchObject({ text: '[SEP]', special: true, start: null });
    const content = tokens!.slice(1, -1);
    expect(content[0]).toMatchObject({ text: 'Héllo', special: false, start: 0, stop: 5 });
    expect(content[1]).toMatchObject({ text: '[UNK]', start: null });
    expect(
      content
        .slice(2)
        .map((t) => t.text)
        .join(''),
    ).toBe('testing');
    expect(content[2]!.start).toBe(8);
    for (const t of content)
      if (t.start !== null) expect(Array.from(input).slice(t.start, t.stop!).join('')).toBe(t.text);
  });

  it('tokenizes several inputs, without special tokens on request', async () => {
    const res = await post('/tokenize', { inputs: ['hello world', 'paris'], add_special_tokens: false });
    const lists: { special: boolean }[][] = res.json();
    expect(lists).toHaveLength(2);
    expect(lists[0]).toHaveLength(2);
    expect(lists.flat().every((t) => !t.special)).toBe(true);
  });

  it('decodes what it tokenized, skipping special tokens unless told not to', async () => {
    const ids = (await post('/tokenize', { inputs: 'hello world' })).json<{ id: number }[][]>()[0]!.map((t) => t.id);
    expect((await post('/decode', { ids })).json()).toEqual(['hello world']);
    expect((await post('/decode', { ids: [ids, ids.slice(1, 2)], skip_special_tokens: false })).json()).toEqual([
      '[CLS] hello world [SEP]',
      'hello',
    ]);
  });
});

describe('TEI GET /info', () => {
  it('describes the model answering /embed, with the server limits', async () => {
    const res = await get('/info');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      model_id: 'tiny-embedder',
      model_dtype: 'float32',
      served_model_name: 'tiny-embedder',
      model_type: { embedding: { pooling: 'mean' } },
      max_input_length: 64,
      max_client_batch_size: 2048,
      auto_truncate: true,
      // Ours, not TEI's: where the model runs.
      device: 'cpu',
    });
    expect(typeof res.json<TeiInfo>().version).toBe('string');
    expect(res.json<TeiInfo>().max_batch_tokens).toBeGreaterThan(0);
  });
});

describe('Cohere POST /v2/rerank', () => {
  const documents = ['the cat sat on the mat', 'quantum field theory', 'cats and dogs'];

  it("answers Cohere v2's shape, cut to top_n, with the scores of /v1/rerank", async () => {
    const res = await post('/v2/rerank', { model: 'tiny-reranker', query: 'cat', documents, top_n: 2 });
    expect(res.statusCode).toBe(200);
    const body = res.json<CohereRerankList>();
    expect(Object.keys(body).sort()).toEqual(['id', 'meta', 'results']);
    expect(body.results).toHaveLength(2);
    expect(Object.keys(body.results[0]!).sort()).toEqual(['index', 'relevance_score']);
    expect(body.meta).toEqual({ api_version: { version: '2' }, billed_units: { search_units: 1 } });
    const v1 = (
      await post('/v1/rerank', { model: 'tiny-reranker', query: 'cat', documents, top_n: 2 })
    ).json<RerankList>().results;
    body.results.forEach((r, i) => {
      expect(r.index).toBe(v1[i]!.index);
      expect(r.relevance_score).toBeCloseTo(v1[i]!.relevance_score, 6);
    });
  });

  it('cuts each document to max_tokens_per_doc tokens', async () => {
    const cut = (
      await post('/v2/rerank', { query: 'cat', documents: ['paris city of light'], max_tokens_per_doc: 1 })
    ).json<CohereRerankList>().results[0]!.relevance_score;
    const first = (await post('/v2/rerank', { query: 'cat', documents: ['paris'] })).json<CohereRerankList>()
      .results[0]!.relevance_score;
    const whole = (
      await post('/v2/rerank', { query: 'cat', documents: ['paris city of light'] })
    ).json<CohereRerankList>().results[0]!.relevance_score;
    expect(cut).toBeCloseTo(first, 6);
    expect(cut).not.toBeCloseTo(whole, 6);
  });
});

describe('Ollama routes', () => {
  it('POST /api/embed answers the vectors of /v1 with counts and durations in ns', async () => {
    const res = await post('/api/embed', { model: 'tiny-embedder', input: ['hello world', 'paris'] });
    expect(res.statusCode).toBe(200);
    const body = res.json<OllamaEmbed>();
    expect(body.model).toBe('tiny-embedder');
    expect(body.embeddings).toHaveLength(2);
    const reference = await v1Vectors(['hello world', 'paris']);
    expectClose(body.embeddings[1]!, reference[1]!);
    expect(Number.isInteger(body.total_duration)).toBe(true);
    expect(body.total_duration).toBeGreaterThan(0);
    expect(body.load_duration).toBe(0);
    expect(body.prompt_eval_count).toBe(4 + 3);
  });

  it('takes an Ollama name with :latest, a single string and dimensions', async () => {
    const res = await post('/api/embed', {
      model: 'tiny-embedder:latest',
      input: 'hello world',
      dimensions: 4,
      truncate: true,
      keep_alive: '5m',
      options: { num_ctx: 64 },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json<OllamaEmbed>().model).toBe('tiny-embedder:latest');
    expect(res.json<OllamaEmbed>().embeddings[0]).toHaveLength(4);
  });

  it('POST /api/embeddings (the older route) answers one vector', async () => {
    const res = await post('/api/embeddings', { model: 'tiny-embedder', prompt: 'hello world' });
    expect(res.statusCode).toBe(200);
    expectClose(res.json<{ embedding: number[] }>().embedding, (await v1Vectors('hello world'))[0]!);
  });

  it("GET /api/tags lists the embedding models in Ollama's shape", async () => {
    const res = await get('/api/tags');
    expect(res.statusCode).toBe(200);
    const { models } = res.json<OllamaTags>();
    expect(models).toHaveLength(1);
    expect(models[0]).toMatchObject({
      name: 'tiny-embedder:latest',
      model: 'tiny-embedder:latest',
      details: { format: 'onnx', family: 'bert', families: ['bert'], quantization_level: 'F32' },
    });
    expect(models[0]!.size).toBeGreaterThan(1000);
    expect(models[0]!.digest).toMatch(/^[0-9a-f]{64}$/);
    expect(Number.isNaN(Date.parse(models[0]!.modified_at))).toBe(false);
    expect(models[0]!.details.parameter_size).toMatch(/^\d+(\.\d)?[KMB]?$/);
  });
});
