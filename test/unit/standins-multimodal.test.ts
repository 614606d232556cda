/**
 * The text-and-image stand-ins (scripts/standins/: CLIP, SigLIP, jina-clip-v2) checked on their own:
 * their ONNX graphs, run by ONNX Runtime on the golden token ids and pixel values, give the vectors
 * of the generator's independent float64 numpy forward pass, one input at a time and batched; and
 * the pixel values written beside each test image are the ones the golden names by hash. The
 * image preprocessing itself (Pillow's, in the generator) is the server's to match, tested there.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { missing } from '../helpers/resources.js';
import { output } from '../helpers/ort.js';
import { listMultimodalStandins } from '../helpers/standins.js';

interface TextItem {
  text: string;
  input_ids: number[];
  raw: number[];
  normalized: number[];
}
interface ImageItem {
  file: string;
  pixel_values: string;
  pixel_values_sha256: string;
  raw: number[];
  normalized: number[];
}
interface Golden {
  repo: string;
  task: 'multimodal';
  tolerance: number;
  dimensions: number;
  image_size: number;
  vision_tokens: number;
  pad_token_id: number;
  graphs: { text: string; vision: string };
  /** The graphs' vector outputs; a graph that also normalises them names those outputs too. */
  outputs: { text: string; image: string; text_normalized?: string; image_normalized?: string };
  texts: TextItem[];
  images: ImageItem[];
}

const dir = inject('standinsDir');
const repos = dir ? listMultimodalStandins(dir) : [];

/** A float32 .npy file's values and shape (numpy's format, version 1 or 2). */
function readNpy(path: string): { data: Float32Array; shape: number[] } {
  const bytes = readFileSync(path);
  expect(bytes.subarray(0, 6).toString('latin1')).toBe('\x93NUMPY');
  const major = bytes[6]!;
  const headerLength = major === 1 ? bytes.readUInt16LE(8) : bytes.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = bytes.subarray(start, start + headerLength).toString('latin1');
  expect(header).toMatch(/'descr': '<f4'/);
  expect(header).toMatch(/'fortran_order': False/);
  const shape = [...header.match(/'shape': \(([^)]*)\)/)![1]!.matchAll(/\d+/g)].map((m) => Number(m[0]));
  const body = bytes.subarray(start + headerLength);
  const data = new Float32Array(body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength));
  expect(data.length).toBe(shape.reduce((a, b) => a * b, 1));
  return { data, shape };
}

function maxDifference(actual: ArrayLike<number>, expected: number[]): number {
  expect(actual.length).toBe(expected.length);
  let worst = 0;
  for (let i = 0; i < expected.length; i++) worst = Math.max(worst, Math.abs(actual[i]! - expected[i]!));
  return worst;
}

/** Rows of int64 ids padded to the longest with `pad`, and their attention mask. */
function padded(rows: number[][], pad: number): { ids: ort.Tensor; mask: ort.Tensor } {
  const width = Math.max(...rows.map((r) => r.length));
  const ids = new BigInt64Array(rows.length * width).fill(BigInt(pad));
  const mask = new BigInt64Array(rows.length * width);
  rows.forEach((row, i) =>
    row.forEach((id, j) => {
      ids[i * width + j] = BigInt(id);
      mask[i * width + j] = 1n;
    }),
  );
  return {
    ids: new ort.Tensor('int64', ids, [rows.length, width]),
    mask: new ort.Tensor('int64', mask, [rows.length, width]),
  };
}

describe.skipIf(missing(dir !== '', 'the stand-ins could not be generated'))(
  'multimodal stand-ins: ONNX graphs against the numpy forward pass',
  () => {
    it('has the CLIP, SigLIP and jina-clip-v2 stand-ins', () => {
      expect(repos).toEqual([
        'Xenova/clip-vit-base-patch16',
        'Xenova/clip-vit-base-patch32',
        'Xenova/clip-vit-large-patch14',
        'Xenova/siglip-base-patch16-224',
        'jinaai/jina-clip-v2',
      ]);
    });

    describe.each(repos)('%s', (repo) => {
      const folder = join(dir, repo);
      const golden = JSON.parse(readFileSync(join(folder, 'golden.json'), 'utf8')) as Golden;
      let text: ort.InferenceSession;
      let vision: ort.InferenceSession;
      beforeAll(async () => {
        text = await ort.InferenceSession.create(join(folder, golden.graphs.text));
        vision =
          golden.graphs.vision === golden.graphs.text
            ? text
            : await ort.InferenceSession.create(join(folder, golden.graphs.vision));
      });
      afterAll(async () => {
        await text?.release();
        if (vision !== text) await vision?.release();
      });

      /**
       * The graph's inputs for a batch of texts or of images. A graph with both towers gets a dummy of
       * the other, as Transformers.js passes it: an empty pixel batch, or a one-token text per image.
       */
      function feeds(session: ort.InferenceSession, rows: number[][], pixels: Float32Array, images: number) {
        const { ids, mask } = padded(
          rows.length ? rows : Array.from({ length: images }, () => [1]),
          golden.pad_token_id,
        );
        const size = golden.image_size;
        const all: Record<string, ort.Tensor> = {
          input_ids: ids,
          attention_mask: mask,
          pixel_values: new ort.Tensor('float32', pixels, [images, 3, size, size]),
        };
        return Object.fromEntries(session.inputNames.map((name) => [name, all[name]!]));
      }

      it('gives the text vectors, one text at a time and padded together', async () => {
        const none = new Float32Array(0);
        for (const item of golden.texts) {
          const result = await text.run(feeds(text, [item.input_ids], none, 0));
          const vector = output(result, golden.outputs.text);
          expect(vector.dims).toEqual([1, golden.dimensions]);
          expect(maxDifference(vector.data as Float32Array, item.raw), item.text).toBeLessThan(golden.tolerance);
          if (golden.outputs.text_normalized) {
            const normalized = output(result, golden.outputs.text_normalized).data as Float32Array;
            expect(maxDifference(normalized, item.normalized), item.text).toBeLessThan(golden.tolerance);
          }
        }
        const batch = await text.run(
          feeds(
            text,
            golden.texts.map((t) => t.input_ids),
            none,
            0,
          ),
        );
        const vectors = output(batch, golden.outputs.text).data as Float32Array;
        golden.texts.forEach((item, i) => {
          const row = vectors.subarray(i * golden.dimensions, (i + 1) * golden.dimensions);
          expect(maxDifference(row, item.raw), item.text).toBeLessThan(golden.tolerance);
        });
      });

      it('has the pixel values the golden names, and gives the image vectors one at a time and batched', async () => {
        const size = golden.image_size;
        const plane = 3 * size * size;
        const all = new Float32Array(golden.images.length * plane);
        for (const [i, item] of golden.images.entries()) {
          expect(existsSync(join(folder, item.file)), item.file).toBe(true);
          const { data, shape } = readNpy(join(folder, item.pixel_values));
          expect(shape).toEqual([3, size, size]);
          const hash = createHash('sha256').update(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
          expect(hash.digest('hex'), item.file).toBe(item.pixel_values_sha256);
          all.set(data, i * plane);
          const result = await vision.run(feeds(vision, [], data, 1));
          const vector = output(result, golden.outputs.image);
          expect(vector.dims).toEqual([1, golden.dimensions]);
          expect(maxDifference(vector.data as Float32Array, item.raw), item.file).toBeLessThan(golden.tolerance);
          if (golden.outputs.image_normalized) {
            const normalized = output(result, golden.outputs.image_normalized).data as Float32Array;
            expect(maxDifference(normalized, item.normalized), item.file).toBeLessThan(golden.tolerance);
          }
        }
        const batch = await vision.run(feeds(vision, [], all, golden.images.length));
        const vectors = output(batch, golden.outputs.image).data as Float32Array;
        golden.images.forEach((item, i) => {
          const row = vectors.subarray(i * golden.dimensions, (i + 1) * golden.dimensions);
          expect(maxDifference(row, item.raw), item.file).toBeLessThan(golden.tolerance);
        });
      });
    });
  },
);
