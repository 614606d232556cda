/**
 * readImageProcessor on preprocessor configs shaped as the Hub's CLIP, SigLIP and jina-clip models
 * ship them, and what it refuses (naming the field) because it could not be reproduced exactly.
 */
import { describe, expect, it } from 'vitest';
import { ModelFilesError } from '../../src/models/facts.js';
import { readImageProcessor } from '../../src/models/image-processor.js';
import {
  clipBilinear336Config,
  clipConfig,
  jinaClipConfig,
  legacyClipConfig,
  siglipConfig,
} from '../fixtures/preprocessor-configs.js';

const CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073];
const CLIP_STD = [0.26862954, 0.26130258, 0.27577711];

describe('readImageProcessor', () => {
  it("reads CLIP's: shortest edge, bicubic, a floored center crop, 1/255, OpenAI's mean and std", () => {
    expect(readImageProcessor(clipConfig)).toEqual({
      resize: { shortestEdge: 224 },
      resample: 'bicubic',
      crop: { height: 224, width: 224, offsets: 'floor' },
      rescale: 0.00392156862745098,
      mean: CLIP_MEAN,
      std: CLIP_STD,
      height: 224,
      width: 224,
    });
  });

  it('reads the older CLIP layout (sizes as numbers, feature_extractor_type) the same way', () => {
    expect(readImageProcessor(legacyClipConfig)).toEqual(readImageProcessor(clipConfig));
  });

  it("takes CLIP's defaults for what the file leaves out", () => {
    const spec = readImageProcessor({ image_processor_type: 'CLIPImageProcessor' });
    expect(spec).toEqual({ ...readImageProcessor(clipConfig), rescale: 1 / 255 });
  });

  it('reads a non-square crop, other filters and switched-off steps', () => {
    const spec = readImageProcessor(clipBilinear336Config);
    expect(spec).toMatchObject({ resample: 'bilinear', crop: { height: 336, width: 320 }, height: 336, width: 320 });
    for (const [code, name] of ['nearest', 'lanczos', 'bilinear', 'bicubic', 'box', 'hamming'].entries())
      expect(readImageProcessor({ ...clipConfig, resample: code }).resample).toBe(name);
    const plain = readImageProcessor({ ...clipConfig, do_rescale: false, do_normalize: false });
    expect(plain.rescale).toBeUndefined();
    expect(plain.mean).toBeUndefined();
    expect(plain.std).toBeUndefined();
    const fixed = readImageProcessor({ ...clipConfig, size: { height: 256, width: 240 }, crop_size: 224 });
    expect(fixed).toMatchObject({ resize: { height: 256, width: 240 }, height: 224, width: 224 });
    const uncropped = readImageProcessor({ ...clipConfig, size: { height: 200, width: 300 }, do_center_crop: false });
    expect(uncropped).toMatchObject({ height: 200, width: 300 });
    expect(uncropped.crop).toBeUndefined();
  });

  it("reads SigLIP's: a fixed height x width, no crop, mean and std 0.5", () => {
    expect(readImageProcessor(siglipConfig)).toEqual({
      resize: { height: 224, width: 224 },
      resample: 'bicubic',
      rescale: 0.00392156862745098,
      mean: [0.5, 0.5, 0.5],
      std: [0.5, 0.5, 0.5],
      height: 224,
      width: 224,
    });
    expect(readImageProcessor({ ...siglipConfig, size: { height: 384, width: 384 } })).toMatchObject({
      height: 384,
      width: 384,
    });
  });

  it("reads jina-clip's open_clip transform: shortest edge, a center crop with rounded offsets", () => {
    expect(readImageProcessor(jinaClipConfig)).toEqual({
      resize: { shortestEdge: 224 },
      resample: 'bicubic',
      crop: { height: 224, width: 224, offsets: 'round-half-even' },
      rescale: 1 / 255,
      mean: CLIP_MEAN,
      std: CLIP_STD,
      height: 224,
      width: 224,
    });
    expect(readImageProcessor({ ...jinaClipConfig, size: 512 })).toMatchObject({ height: 512, width: 512 });
    expect(readImageProcessor({ ...jinaClipConfig, interpolation: 'bilinear' }).resample).toBe('bilinear');
    const squash = readImageProcessor({ ...jinaClipConfig, resize_mode: 'squash' });
    expect(squash.resize).toEqual({ height: 224, width: 224 });
    expect(squash.crop).toBeUndefined();
  });

  it.each([
    ['no object', [], /expected a JSON object/],
    [
      'an unknown processor',
      { image_processor_type: 'ViTImageProcessor' },
      /"image_processor_type".*ViTImageProcessor/,
    ],
    ['a fast processor', { image_processor_type: 'CLIPImageProcessorFast' }, /torchvision, not Pillow/],
    ['no processor type', { size: 224 }, /"image_processor_type" is missing/],
    ['do_pad', { ...clipConfig, do_pad: true }, /"do_pad" is on/],
    ['a resample code PIL does not have', { ...clipConfig, resample: 7 }, /"resample" is 7/],
    ['a resample given by name', { ...clipConfig, resample: 'bicubic' }, /"resample" is "bicubic"/],
    ['longest_edge', { ...clipConfig, size: { longest_edge: 224 } }, /"size".*longest_edge/],
    ['max_size', { ...clipConfig, size: { shortest_edge: 224, max_size: 300 } }, /"size"/],
    ['a crop that pads', { ...clipConfig, crop_size: 256 }, /"crop_size".*pads/],
    ['no fixed size', { ...clipConfig, do_center_crop: false }, /"size" leaves the image size to the input/],
    ['two means', { ...clipConfig, image_mean: [0.5, 0.5] }, /"image_mean".*three numbers/],
    ['a zero std', { ...clipConfig, image_std: [0.5, 0, 0.5] }, /"std" has a zero/],
    ['a fractional size', { ...clipConfig, size: { shortest_edge: 22.5 } }, /"size" is 22.5/],
    ['a string switch', { ...clipConfig, do_resize: 'yes' }, /"do_resize" is "yes"/],
    ['a shortest edge for SigLIP', { ...siglipConfig, size: 224 }, /"size" must be .*SigLIP/],
    ["jina-clip's longest mode", { ...jinaClipConfig, resize_mode: 'longest' }, /"resize_mode" is "longest"/],
    ['jina-clip with a non-square size', { ...jinaClipConfig, size: [224, 256] }, /"size".*square/],
    ['jina-clip with an unknown interpolation', { ...jinaClipConfig, interpolation: 'lanczos' }, /"interpolation"/],
  ])('refuses %s, naming the field', (_what, config, message) => {
    expect(() => readImageProcessor(config, 'models/x/preprocessor_config.json')).toThrow(ModelFilesError);
    expect(() => readImageProcessor(config, 'models/x/preprocessor_config.json')).toThrow(message);
    expect(() => readImageProcessor(config, 'models/x/preprocessor_config.json')).toThrow(
      /^models\/x\/preprocessor_config\.json: /,
    );
  });
});
