/**
 * Image-text models recognised from their own files (models/multimodal.ts): the CLIP stand-in's
 * folder read as the registry reads it, then changed one file at a time into what can not be
 * served exactly, each refused with the reason. And the graphs a pull takes of a two-tower export.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { readModelFacts } from '../../src/models/facts.js';
import { variantFiles } from '../../src/models/repo-files.js';
import { findTowerGraphs, findVariantGraph } from '../../src/models/variants.js';
import { missing } from '../helpers/resources.js';

const dir = inject('standinsDir');
const clip = dir ? join(dir, 'Xenova', 'clip-vit-base-patch32') : '';

/** A copy of the CLIP stand-in's folder, changed by `change`. */
function folder(change: (at: string) => void = () => undefined): string {
  const at = mkdtempSync(join(tmpdir(), 'onnx-gateway-clip-'));
  cpSync(clip, at, { recursive: true });
  change(at);
  return at;
}

function editJson(path: string, edit: (value: Record<string, unknown>) => void): void {
  const value = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  edit(value);
  writeFileSync(path, JSON.stringify(value));
}

describe('the graphs of a two-tower export', () => {
  const listing = [
    'config.json',
    'onnx/model.onnx',
    'onnx/text_model.onnx',
    'onnx/vision_model.onnx',
    'onnx/text_model_fp16.onnx',
    'onnx/vision_model_fp16.onnx',
    'onnx/text_model_quantized.onnx',
  ];

  it('prefers both towers to the joint graph, variant by variant', () => {
    expect(findTowerGraphs('fp32', listing)).toEqual({
      text: 'onnx/text_model.onnx',
      vision: 'onnx/vision_model.onnx',
    });
    expect(findVariantGraph('fp16', listing)).toBe('onnx/text_model_fp16.onnx');
    expect(variantFiles('fp16', listing)).toEqual({
      graph: 'onnx/text_model_fp16.onnx',
      towers: ['onnx/vision_model_fp16.onnx'],
      data: [],
    });
  });

  it('takes the joint graph where a variant lacks a tower, and a text model as before', () => {
    // int8: a text tower without its vision tower is no pair.
    expect(findTowerGraphs('int8', listing)).toBeUndefined();
    expect(findVariantGraph('fp32', ['onnx/model.onnx', 'onnx/text_model.onnx'])).toBe('onnx/model.onnx');
    expect(variantFiles('fp32', ['onnx/model.onnx', 'onnx/model.onnx_data'])).toEqual({
      graph: 'onnx/model.onnx',
      towers: [],
      data: ['onnx/model.onnx_data'],
    });
  });
});

describe.skipIf(missing(dir !== '', 'the CLIP stand-in is not there'))('image-text model facts', () => {
  const read = (at: string) => readModelFacts(at, join(at, 'onnx', 'text_model.onnx'), 'clip');

  it("recognises CLIP from config.json, the image processor and both graphs' interfaces", async () => {
    const at = folder();
    try {
      const facts = await read(at);
      expect(facts).toMatchObject({
        task: 'embedding',
        family: 'clip',
        maxTokens: 77,
        width: 32,
        normalize: true,
        output: { name: 'text_embeds', pooled: true },
        heads: { kinds: ['dense'] },
      });
      // transformers.js' CLIP text tower takes input_ids alone; padding after the end token is harmless (causal).
      expect(facts.feeds).toMatchObject({ attentionMask: false });
      expect(facts.feeds.fixedLength).toBeUndefined();
      expect(facts.feeds.uniformLength).toBeUndefined();
      expect(facts.multimodal).toMatchObject({
        family: 'clip',
        vision: {
          onnxPath: join(at, 'onnx', 'vision_model.onnx'),
          joint: false,
          output: { name: 'image_embeds' },
          height: 224,
          width: 224,
          // (224 / 32)^2 patches and the class token.
          sequenceLength: 50,
        },
        processor: { resample: 'bicubic', resize: { shortestEdge: 224 }, crop: { height: 224, width: 224 } },
      });
    } finally {
      rmSync(at, { recursive: true, force: true });
    }
  });

  it.each([
    [
      'without preprocessor_config.json',
      (at: string) => rmSync(join(at, 'preprocessor_config.json')),
      /needs preprocessor_config\.json/,
    ],
    [
      'without its vision tower',
      (at: string) => rmSync(join(at, 'onnx', 'vision_model.onnx')),
      /has no vision tower beside it \(vision_model\.onnx\)/,
    ],
    [
      'of an image-text family not served',
      (at: string) => editJson(join(at, 'config.json'), (config) => (config.model_type = 'blip')),
      /model_type "blip" is an image-text model this server does not serve/,
    ],
    [
      'with a fast (torchvision) image processor',
      (at: string) =>
        editJson(
          join(at, 'preprocessor_config.json'),
          (config) => (config.image_processor_type = 'CLIPImageProcessorFast'),
        ),
      /image_processor_type.*the fast processors resize with torchvision/,
    ],
  ])('refuses a CLIP folder %s, saying why', async (_, change, reason) => {
    const at = folder(change);
    try {
      await expect(read(at)).rejects.toThrow(reason);
    } finally {
      rmSync(at, { recursive: true, force: true });
    }
  });
});
