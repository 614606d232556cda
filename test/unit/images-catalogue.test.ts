import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { choosePipeline } from '../../src/images/prompt.js';
import { ImageCatalogue, validateImageManifest, type ServedImageModel } from '../../src/models/image-catalogue.js';
import { ImageRegistry } from '../../src/models/image-registry.js';
import { missing } from '../helpers/resources.js';

const catalogue = ImageCatalogue.load();
const index = resolve('../shared/models/trained/models.json');

describe('image catalogue', () => {
  it('loads every manifest in models/images', () => {
    expect(
      catalogue
        .list()
        .map((m) => m.id)
        .sort(),
    ).toEqual([
      'espcn-superres-x3-y',
      'fast-neural-style-candy-nc16',
      'fast-neural-style-mosaic-nc16',
      'fast-neural-style-rain-princess-nc16',
      'fast-neural-style-udnie-nc16',
      'isnet-imgly-small',
      'realesr-animevideov3',
    ]);
  });

  it.skipIf(
    missing(
      existsSync(index),
      `${index} is missing: the trained image models' index, in ../shared beside the checkout`,
    ),
  )('agrees with the facts of the trained models index (needs ../shared/models/trained/models.json)', () => {
    const facts = JSON.parse(readFileSync(index, 'utf8')) as {
      models: {
        id: string;
        scale: number;
        inputs: { name: string; shape: unknown[] }[];
        outputs: { name: string }[];
        files: { sha256: string }[];
      }[];
    };
    for (const manifest of catalogue.list()) {
      const fact = facts.models.find((m) => m.id === manifest.id)!;
      expect(fact, manifest.id).toBeDefined();
      expect(manifest.input.name).toBe(fact.inputs[0]!.name);
      expect(manifest.output.name).toBe(fact.outputs[0]!.name);
      expect(manifest.scale).toBe(fact.scale);
      expect(manifest.source.sha256).toBe(fact.files[0]!.sha256);
      const [, channels, height, width] = fact.inputs[0]!.shape;
      expect(manifest.input.channels === 'rgb' ? 3 : 1).toBe(channels);
      if (typeof height === 'number') expect(manifest.input.size).toEqual([height, width]);
      else expect(manifest.input.size).toBeUndefined();
    }
  });

  it('refuses manifests that miss what a pipeline needs', () => {
    const good = catalogue.get('realesr-animevideov3')!;
    expect(() => validateImageManifest({ ...good, task: 'colourise' }, 'x.json')).toThrow(/task/);
    expect(() => validateImageManifest({ ...good, scale: 1 }, 'x.json')).toThrow(/super-resolution/);
    expect(() => validateImageManifest({ ...good, input: { ...good.input, std: 0 } }, 'x.json')).toThrow(/std/);
    expect(() => validateImageManifest({ ...good, tile: { size: 32, overlap: 16 } }, 'x.json')).toThrow(/tile/);
  });

  it('says where to get a missing model file', () => {
    expect(() => ImageRegistry.load(['realesr-animevideov3'], '/nonexistent')).toThrow(
      /Download it with "onnx-gateway models pull realesr-animevideov3", or fetch https:\/\/.*realesr-animevideov3\.onnx .*sha256 7fcf233c/,
    );
    expect(() => ImageRegistry.load(['no-such-pipeline'], '/nonexistent')).toThrow(/unknown/);
  });
});

describe('choosing a pipeline from the prompt', () => {
  const served = (ids: string[]) =>
    new ImageRegistry(
      ids.map(
        (id) =>
          ({
            id,
            onnxPath: '',
            input: catalogue.get(id)!.input,
            output: catalogue.get(id)!.output,
            manifest: catalogue.get(id)!,
            created: 0,
          }) satisfies ServedImageModel,
      ),
    );
  const all = served([
    'realesr-animevideov3',
    'isnet-imgly-small',
    'fast-neural-style-candy-nc16',
    'fast-neural-style-rain-princess-nc16',
  ]);
  const pick = (prompt: string, registry = all) => choosePipeline(registry, undefined, prompt).id;

  it('follows a named model whatever the prompt says', () => {
    expect(choosePipeline(all, 'isnet-imgly-small', 'upscale to 4K').id).toBe('isnet-imgly-small');
  });

  it('matches styles by name, then background words, then size words', () => {
    expect(pick('in the style of rain princess')).toBe('fast-neural-style-rain-princess-nc16');
    expect(pick('Candy!')).toBe('fast-neural-style-candy-nc16');
    expect(pick('remove the background')).toBe('isnet-imgly-small');
    expect(pick('make the background transparent and upscale')).toBe('isnet-imgly-small');
    expect(pick('Upscale to 4K')).toBe('realesr-animevideov3');
    expect(pick('enhance the resolution, keep the background')).toBe('realesr-animevideov3');
  });

  it('asks for a style name when several styles are served', () => {
    expect(() => pick('make it artistic')).toThrow(/candy, rain-princess/);
    expect(pick('make it artistic', served(['fast-neural-style-candy-nc16']))).toBe('fast-neural-style-candy-nc16');
  });

  it('refuses a prompt none of the served pipelines can do', () => {
    expect(() => pick('add a hat to the cat')).toThrow(/asks for nothing this server can do/);
    expect(() => pick('upscale', served(['isnet-imgly-small']))).toThrow(/remove the background/);
  });
});
