/**
 * Graph variants by file name, external-data files, served ids, and where a model id's folder is.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { arch } from 'node:process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Catalogue } from '../../src/models/catalogue.js';
import { isRepoId, modelDir, stagingDirOf } from '../../src/models/paths.js';
import {
  externalDataFiles,
  findVariantGraph,
  parseServedId,
  parseVariant,
  variantCandidates,
  variantsIn,
} from '../../src/models/variants.js';

/** The ONNX files of sentence-transformers/all-MiniLM-L6-v2 and of a transformers.js repository, side by side. */
const SENTENCE_TRANSFORMERS = [
  'onnx/model.onnx',
  'onnx/model_O1.onnx',
  'onnx/model_O2.onnx',
  'onnx/model_O3.onnx',
  'onnx/model_O4.onnx',
  'onnx/model_qint8_arm64.onnx',
  'onnx/model_qint8_avx512.onnx',
  'onnx/model_qint8_avx512_vnni.onnx',
  'onnx/model_quint8_avx2.onnx',
  'openvino/openvino_model.xml',
];
const TRANSFORMERS_JS = [
  'onnx/model.onnx',
  'onnx/model_fp16.onnx',
  'onnx/model_int8.onnx',
  'onnx/model_quantized.onnx',
  'onnx/model_q4.onnx',
  'onnx/model_uint8.onnx',
];

describe('variants', () => {
  it('finds each variant by its candidate names, in order of preference', () => {
    expect(findVariantGraph('fp32', ['model.onnx', 'onnx/model.onnx'])).toBe('onnx/model.onnx');
    expect(findVariantGraph('fp32', ['model.onnx', 'onnx/model_fp16.onnx'])).toBe('model.onnx');
    expect(findVariantGraph('fp16', TRANSFORMERS_JS)).toBe('onnx/model_fp16.onnx');
    expect(findVariantGraph('int8', TRANSFORMERS_JS)).toBe('onnx/model_int8.onnx');
    expect(findVariantGraph('int8', ['onnx/model.onnx', 'onnx/model_quantized.onnx'])).toBe(
      'onnx/model_quantized.onnx',
    );
    expect(findVariantGraph('O3', SENTENCE_TRANSFORMERS)).toBe('onnx/model_O3.onnx');
    expect(findVariantGraph('fp16', SENTENCE_TRANSFORMERS)).toBeUndefined();
  });

  it('takes the int8 graph built for this machine among the instruction-set ones', () => {
    // model_quint8_avx2 is not a qint8 graph (unsigned weights): it is left alone.
    expect(findVariantGraph('int8', SENTENCE_TRANSFORMERS)).toBe(
      arch === 'arm64' ? 'onnx/model_qint8_arm64.onnx' : 'onnx/model_qint8_avx512.onnx',
    );
    expect(findVariantGraph('int8', ['onnx/model_qint8_arm64.onnx'])).toBe('onnx/model_qint8_arm64.onnx');
    expect(variantCandidates('int8')).toEqual([
      'onnx/model_int8.onnx',
      'onnx/model_quantized.onnx',
      'onnx/model_qint8*.onnx',
    ]);
  });

  it('lists the variants a listing has', () => {
    expect(variantsIn(SENTENCE_TRANSFORMERS).map((v) => v.variant)).toEqual(['fp32', 'int8', 'O1', 'O2', 'O3', 'O4']);
    expect(variantsIn(TRANSFORMERS_JS).map((v) => v.variant)).toEqual(['fp32', 'fp16', 'int8']);
    expect(variantsIn(['onnx/encoder_model.onnx'])).toEqual([]);
  });

  it('takes the files beside a graph whose names start with its name as its external data', () => {
    const paths = [
      'onnx/model.onnx',
      'onnx/model.onnx_data',
      'onnx/model.onnx_data_1',
      'onnx/model_fp16.onnx',
      'onnx/model_fp16.onnx_data',
      'model.onnx',
      'model.onnx.data',
      'onnx/model.onnx/not-data',
      'config.json',
    ];
    expect(externalDataFiles('onnx/model.onnx', paths)).toEqual(['onnx/model.onnx_data', 'onnx/model.onnx_data_1']);
    expect(externalDataFiles('onnx/model_fp16.onnx', paths)).toEqual(['onnx/model_fp16.onnx_data']);
    expect(externalDataFiles('model.onnx', paths)).toEqual(['model.onnx.data']);
    expect(externalDataFiles('onnx/model_O1.onnx', paths)).toEqual([]);
  });

  it('parses variant names and served ids', () => {
    expect(parseVariant('FP16')).toBe('fp16');
    expect(parseVariant('o2')).toBe('O2');
    expect(parseVariant('quantized')).toBe('int8');
    expect(() => parseVariant('q4')).toThrow(
      /"q4" is not an ONNX variant: use one of fp32, fp16, int8, O1, O2, O3, O4/,
    );
    expect(parseServedId('BAAI/bge-small-en-v1.5')).toEqual({ baseId: 'BAAI/bge-small-en-v1.5', variant: 'fp32' });
    expect(parseServedId('BAAI/bge-small-en-v1.5', 'fp16')).toEqual({
      baseId: 'BAAI/bge-small-en-v1.5',
      variant: 'fp16',
    });
    expect(parseServedId('all-MiniLM-L6-v2:int8', 'fp16')).toEqual({ baseId: 'all-MiniLM-L6-v2', variant: 'int8' });
  });
});

describe('model folders', () => {
  let modelsDir: string;
  beforeAll(async () => {
    modelsDir = await mkdtemp(join(tmpdir(), 'onnx-gateway-paths-'));
  });
  afterAll(() => rm(modelsDir, { recursive: true, force: true }));

  const catalogue = new Catalogue([
    {
      id: 'all-MiniLM-L6-v2',
      task: 'embedding',
      source: { kind: 'hub', repo: 'sentence-transformers/all-MiniLM-L6-v2', revision: 'c'.repeat(40) },
    },
    { id: 'synthetic-model', task: 'embedding', source: { kind: 'generated', command: 'make it' } },
  ]);

  it('puts a repository in <owner>/<name>, and a catalogue id in its repository folder unless a folder of that id exists', async () => {
    expect(modelDir(modelsDir, 'BAAI/bge-small-en-v1.5')).toBe(join(modelsDir, 'BAAI', 'bge-small-en-v1.5'));
    expect(modelDir(modelsDir, 'all-MiniLM-L6-v2', catalogue)).toBe(
      join(modelsDir, 'sentence-transformers', 'all-MiniLM-L6-v2'),
    );
    expect(modelDir(modelsDir, 'sentence-transformers/all-MiniLM-L6-v2', catalogue)).toBe(
      join(modelsDir, 'sentence-transformers', 'all-MiniLM-L6-v2'),
    );
    expect(modelDir(modelsDir, 'synthetic-model', catalogue)).toBe(join(modelsDir, 'synthetic-model'));
    expect(modelDir(modelsDir, 'my-folder', catalogue)).toBe(join(modelsDir, 'my-folder'));
    // A folder an earlier version pulled the catalogue model into stays in use.
    await mkdir(join(modelsDir, 'all-MiniLM-L6-v2'));
    expect(modelDir(modelsDir, 'all-MiniLM-L6-v2', catalogue)).toBe(join(modelsDir, 'all-MiniLM-L6-v2'));
    expect(modelDir(modelsDir, 'sentence-transformers/all-MiniLM-L6-v2', catalogue)).toBe(
      join(modelsDir, 'all-MiniLM-L6-v2'),
    );
    expect(stagingDirOf(join(modelsDir, 'BAAI', 'bge-small-en-v1.5'))).toBe(
      join(modelsDir, 'BAAI', '.bge-small-en-v1.5.download'),
    );
  });

  it('tells repository ids from paths that would leave the models dir', () => {
    expect(isRepoId('BAAI/bge-small-en-v1.5')).toBe(true);
    expect(isRepoId('intfloat/multilingual-e5-small')).toBe(true);
    for (const id of ['bge-small-en-v1.5', '../etc', 'a/..', './a', 'a/b/c', 'a/', '/a', 'a/.hidden'])
      expect(isRepoId(id), id).toBe(false);
  });
});
