/**
 * `dimensions` as the model's card computes it, on the stand-in of nomic-ai/nomic-embed-text-v1.5
 * (scripts/standins/families/nomic.py): its card puts a layer norm over the full width (no weight or
 * bias, eps 1e-5) before the cut, then the first N components, then L2. Every route that takes a
 * width (OpenAI's body and engine path, Cohere's output_dimension, Ollama's and TEI's dimensions)
 * against the golden cuts of an independent numpy computation, within 1e-5; the encodings after the
 * cut; the rows the embedding cache keeps (pooled, before any step) cut the same; and without
 * `dimensions` the vectors unchanged.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Server } from '../../src/main.js';
import { DEFAULT_CALIBRATION_FILE, readCalibrationTexts } from '../../src/models/calibration-text.js';
import { Catalogue } from '../../src/models/catalogue.js';
import { calibrationRanges, quantize } from '../../src/vectors/index.js';
import { floatVectors, type EmbeddingList } from '../helpers/bodies.js';
import { missing } from '../helpers/resources.js';
import { auth, startServer } from '../helpers/server.js';
import { listStandins } from '../helpers/standins.js';

const NOMIC = 'nomic-ai/nomic-embed-text-v1.5';
/** What the card's cuts must match to: ONNX Runtime's float32 agrees with float64 numpy to ~1e-6. */
const TOLERANCE = 1e-5;

interface Golden {
  embeddings: { text: string; prompt_name: 'query' | 'document' | null; pooled: number[] }[];
  /** The card's cuts by width: layer norm over the full width, the first N, L2. */
  matryoshka: Record<string, number[][]>;
  /** sentence-transformers' truncate_dim cuts (the first N, L2), to tell the two readings apart. */
  matryoshka_plain: Record<string, number[][]>;
  before_cut: { step: string; epsilon: number };
}

const dir = inject('standinsDir');
const present = dir !== '' && listStandins(dir).includes(NOMIC);
const golden = present
  ? (JSON.parse(readFileSync(join(dir, NOMIC, 'golden.json'), 'utf8')) as Golden)
  : ({ embeddings: [], matryoshka: {}, matryoshka_plain: {}, before_cut: { step: '', epsilon: 0 } } as Golden);
const widths = Object.keys(golden.matryoshka).map(Number);
/** The golden items by the prompt they were embedded with, each with its index in the golden. */
const groups = [null, 'query', 'document'].map((prompt) =>
  golden.embeddings.flatMap((item, index) => (item.prompt_name === prompt ? [{ ...item, index }] : [])),
);

function maxDifference(actual: ArrayLike<number>, expected: number[]): number {
  expect(actual.length).toBe(expected.length);
  let worst = 0;
  for (let i = 0; i < expected.length; i++) worst = Math.max(worst, Math.abs(actual[i]! - expected[i]!));
  return worst;
}

/** Whether bit `d` of a row packed big-endian, 8 dimensions to a byte, is set. */
const bit = (bytes: number[], d: number) => ((bytes[d >> 3]! & 0xff) >> (7 - (d & 7))) & 1;

describe.skipIf(missing(present, `the stand-ins could not be generated: ${inject('standinsMissing')}`))(
  `${NOMIC}: dimensions as its card computes them`,
  () => {
    let server: Server;
    const post = async (url: string, payload: object) => {
      const res = await server.app.inject({ method: 'POST', url, headers: auth, payload });
      expect(res.statusCode, res.body).toBe(200);
      return res;
    };
    /** The vectors of one prompt group at `width` from each route that takes a width. */
    const routes: Record<string, (texts: string[], prompt: string | null, width: number) => Promise<number[][]>> = {
      '/v1/embeddings': async (input, prompt, dimensions) =>
        floatVectors(
          (
            await post('/v1/embeddings', { model: NOMIC, input, dimensions, ...(prompt ? { input_type: prompt } : {}) })
          ).json<EmbeddingList>(),
        ),
      '/v1/engines/{model}/embeddings': async (input, prompt, dimensions) =>
        floatVectors(
          (
            await post(`/v1/engines/${NOMIC}/embeddings`, {
              input,
              dimensions,
              ...(prompt ? { input_type: prompt } : {}),
            })
          ).json<EmbeddingList>(),
        ),
      'Cohere /v2/embed output_dimension': async (texts, prompt, output_dimension) =>
        (
          await post('/v2/embed', {
            model: NOMIC,
            texts,
            output_dimension,
            ...(prompt ? { input_type: prompt === 'query' ? 'search_query' : 'search_document' } : {}),
          })
        ).json<{ embeddings: { float: number[][] } }>().embeddings.float,
      'TEI /embed dimensions': async (inputs, prompt, dimensions) =>
        (await post('/embed', { inputs, dimensions, ...(prompt ? { prompt_name: prompt } : {}) })).json<number[][]>(),
    };

    beforeAll(async () => {
      // The cache on: a row is kept as pooled, before any step, and cut per request.
      server = await startServer({ modelsDir: dir, models: [NOMIC], teiModels: [NOMIC], workers: 1, cacheMaxMb: 16 });
    }, 120_000);
    afterAll(async () => {
      await server?.close();
    });

    it("serves the catalogue's step: a layer norm with torch's epsilon, as the golden's", () => {
      const step = server.registry.resolve(NOMIC, 'embedding').beforeCut;
      expect(step).toEqual({ step: 'layer-norm', epsilon: 1e-5 });
      expect(Catalogue.load().get(NOMIC)!.beforeCut).toEqual(step);
      expect(golden.before_cut).toEqual(step);
    });

    it('answers the card cuts at every Matryoshka width on every route, within 1e-5, and not the plain cuts', async () => {
      let worst = 0;
      for (const [route, vectorsOf] of Object.entries(routes)) {
        for (const width of widths) {
          for (const group of groups) {
            if (group.length === 0) continue;
            const vectors = await vectorsOf(
              group.map((item) => item.text),
              group[0]!.prompt_name,
              width,
            );
            group.forEach((item, i) => {
              const what = `${route} ${width}: ${item.text}`;
              const difference = maxDifference(vectors[i]!, golden.matryoshka[width]![item.index]!);
              expect(difference, what).toBeLessThanOrEqual(TOLERANCE);
              worst = Math.max(worst, difference);
              // The two readings differ by more than 100 times the tolerance on every input of the stand-in.
              expect(maxDifference(vectors[i]!, golden.matryoshka_plain[width]![item.index]!), what).toBeGreaterThan(
                100 * TOLERANCE,
              );
            });
          }
        }
      }
      expect(worst).toBeLessThanOrEqual(TOLERANCE);
    });

    it("answers Ollama's dimensions (no prompt) with the card cuts", async () => {
      const plain = groups[0]!;
      for (const width of widths) {
        const res = await post('/api/embed', {
          model: NOMIC,
          input: plain.map((item) => item.text),
          dimensions: width,
        });
        res
          .json<{ embeddings: number[][] }>()
          .embeddings.forEach((vector, i) =>
            expect(maxDifference(vector, golden.matryoshka[width]![plain[i]!.index]!), `${width}`).toBeLessThanOrEqual(
              TOLERANCE,
            ),
          );
      }
    });

    it('leaves the vectors as sentence-transformers gives them without dimensions (absent or 0)', async () => {
      for (const group of groups) {
        const prompt = group[0]!.prompt_name;
        for (const dimensions of [undefined, 0]) {
          const vectors = await routes['/v1/embeddings']!(
            group.map((item) => item.text),
            prompt,
            dimensions as number,
          );
          group.forEach((item, i) =>
            expect(maxDifference(vectors[i]!, item.pooled), `${dimensions}: ${item.text}`).toBeLessThanOrEqual(
              TOLERANCE,
            ),
          );
        }
      }
    });

    it('cuts the rows the cache keeps (pooled, before any step) as the card says', async () => {
      const plain = groups[0]!;
      const input = plain.map((item) => item.text);
      await post('/v1/embeddings', { model: NOMIC, input });
      for (const width of widths) {
        const res = await post('/v1/embeddings', { model: NOMIC, input, dimensions: width });
        expect(res.headers['x-cache-hits'], `${width}`).toBe(String(input.length));
        floatVectors(res.json<EmbeddingList>()).forEach((vector, i) =>
          expect(maxDifference(vector, golden.matryoshka[width]![plain[i]!.index]!), `${width}`).toBeLessThanOrEqual(
            TOLERANCE,
          ),
        );
      }
    });

    it('encodes after the cut: binary and ubinary are the signs of the card cuts, int8 is over ranges of card cuts', async () => {
      const plain = groups[0]!;
      const input = plain.map((item) => item.text);
      for (const width of widths) {
        const vectorsOf = async (encoding_format: string) =>
          (await post('/v1/embeddings', { model: NOMIC, input, dimensions: width, encoding_format }))
            .json<EmbeddingList>()
            .data.map((d) => d.embedding as number[]);
        const ubinary = await vectorsOf('ubinary');
        const binary = await vectorsOf('binary');
        plain.forEach((item, row) => {
          const expected = golden.matryoshka[width]![item.index]!;
          expect(ubinary[row]).toHaveLength(Math.ceil(width / 8));
          expected.forEach((x, d) => expect(bit(ubinary[row]!, d), `${width} ${item.text} [${d}]`).toBe(x > 0 ? 1 : 0));
          expect(binary[row]).toEqual(ubinary[row]!.map((byte) => byte - 128));
        });
      }
      // int8 and uint8: each dimension over its range on the calibration text, cut as the request is.
      const calibration = readCalibrationTexts(readFileSync(DEFAULT_CALIBRATION_FILE, 'utf8'));
      const width = widths[2]!;
      const calibrated = floatVectors(
        (await post('/v1/embeddings', { model: NOMIC, input: calibration, dimensions: width })).json<EmbeddingList>(),
      );
      const ranges = calibrationRanges(Float32Array.from(calibrated.flat()), width);
      const floats = Float32Array.from(
        floatVectors(
          (await post('/v1/embeddings', { model: NOMIC, input, dimensions: width })).json<EmbeddingList>(),
        ).flat(),
      );
      for (const precision of ['int8', 'uint8'] as const) {
        const answered = (
          await post('/v1/embeddings', { model: NOMIC, input, dimensions: width, encoding_format: precision })
        )
          .json<EmbeddingList>()
          .data.flatMap((d) => d.embedding as number[]);
        expect(answered, precision).toEqual(Array.from(quantize(floats, width, precision, ranges)));
      }
    });
  },
);
