/**
 * What an image embedder's `preprocessor_config.json` says about turning an image into its
 * `pixel_values`, as transformers' image processors (the Pillow ones) do it: resize, center crop,
 * rescale, normalise. Read once; anything that could not be reproduced exactly is refused naming
 * the field, so that a served vector is always the one Python gives.
 *
 * Covered: CLIPImageProcessor (and its older name CLIPFeatureExtractor), SiglipImageProcessor, and
 * jina-clip's JinaCLIPImageProcessor (open_clip's torchvision transform: a shortest-edge resize and
 * a center crop whose offsets are rounded, not floored).
 */
import { ModelFilesError } from './facts.js';

export type Resample = 'nearest' | 'bilinear' | 'bicubic' | 'lanczos' | 'box' | 'hamming';

export interface ImageProcessorSpec {
  /** shortest edge to `shortestEdge` (long side floored: int(size * long / short)), or a fixed height x width; absent: no resize. */
  resize?: { shortestEdge: number } | { height: number; width: number };
  resample: Resample;
  /**
   * center crop; absent: none. `offsets`: how the top and left offsets are computed: 'floor' as
   * transformers' center_crop ((h - ch) // 2, the default), 'round-half-even' as torchvision's
   * center_crop (int(round((h - ch) / 2.0)), Python's rounding: 0.5 -> 0, 1.5 -> 2).
   */
  crop?: { height: number; width: number; offsets?: 'floor' | 'round-half-even' };
  /** multiply after conversion to float (e.g. 1/255); absent: none. */
  rescale?: number;
  mean?: readonly [number, number, number];
  std?: readonly [number, number, number];
  /** the pixel_values' height and width after everything: the tensor is [n, 3, height, width]. */
  height: number;
  width: number;
}

/** PIL's resampling codes, as preprocessor configs store them. */
const PIL_RESAMPLE: readonly Resample[] = ['nearest', 'lanczos', 'bilinear', 'bicubic', 'box', 'hamming'];

const OPENAI_CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073] as const;
const OPENAI_CLIP_STD = [0.26862954, 0.26130258, 0.27577711] as const;
const IMAGENET_STANDARD = [0.5, 0.5, 0.5] as const;

type Config = Record<string, unknown>;

class Reader {
  constructor(
    readonly config: Config,
    readonly file: string,
  ) {}

  refuse(field: string, why: string): never {
    throw new ModelFilesError(`${this.file}: "${field}" ${why}`);
  }

  has(field: string): boolean {
    return this.config[field] !== undefined && this.config[field] !== null;
  }

  flag(field: string, fallback: boolean): boolean {
    if (!this.has(field)) return fallback;
    const value = this.config[field];
    if (typeof value !== 'boolean') this.refuse(field, `is ${JSON.stringify(value)}, expected true or false.`);
    return value;
  }

  size(field: string, value: unknown): number {
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1)
      this.refuse(field, `is ${JSON.stringify(value)}, expected a positive whole number of pixels.`);
    return value;
  }

  number(field: string, fallback: number): number {
    if (!this.has(field)) return fallback;
    const value = this.config[field];
    if (typeof value !== 'number' || !Number.isFinite(value))
      this.refuse(field, `is ${JSON.stringify(value)}, expected a number.`);
    return value;
  }

  /** Three per-channel values, or one for all three (transformers accepts both). */
  triple(field: string, fallback: readonly [number, number, number]): [number, number, number] {
    if (!this.has(field)) return [...fallback];
    const value = this.config[field];
    const values = typeof value === 'number' ? [value, value, value] : value;
    if (
      !Array.isArray(values) ||
      values.length !== 3 ||
      !values.every((v) => typeof v === 'number' && Number.isFinite(v))
    )
      this.refuse(field, `is ${JSON.stringify(value)}, expected three numbers (one per RGB channel).`);
    return values as [number, number, number];
  }

  resample(field: string, fallback: Resample): Resample {
    if (!this.has(field)) return fallback;
    const value = this.config[field];
    const resample = typeof value === 'number' && Number.isInteger(value) ? PIL_RESAMPLE[value] : undefined;
    if (!resample)
      this.refuse(field, `is ${JSON.stringify(value)}, not a PIL resampling filter (0 nearest .. 5 hamming).`);
    return resample;
  }

  /** transformers' `do_*` switches this reader does not implement must be off. */
  refuseSwitches(known: readonly string[]): void {
    for (const [key, value] of Object.entries(this.config)) {
      if (key.startsWith('do_') && !known.includes(key) && value !== false && value !== null)
        this.refuse(key, 'is on; this server does not implement that step, so the pixel values would differ.');
    }
  }
}

/** transformers' `get_size_dict` for `size` (an int is the shortest edge) and `crop_size` (an int is a square). */
function readSize(
  reader: Reader,
  field: string,
  value: unknown,
  intMeans: 'shortest' | 'square',
): { shortestEdge: number } | { height: number; width: number } {
  if (typeof value === 'number') {
    const size = reader.size(field, value);
    return intMeans === 'shortest' ? { shortestEdge: size } : { height: size, width: size };
  }
  if (Array.isArray(value) && value.length === 2)
    return { height: reader.size(field, value[0]), width: reader.size(field, value[1]) };
  if (typeof value === 'object' && value !== null) {
    const size = value as Record<string, unknown>;
    const keys = Object.keys(size).filter((k) => size[k] !== null && size[k] !== undefined);
    if (keys.length === 1 && keys[0] === 'shortest_edge')
      return { shortestEdge: reader.size(field, size.shortest_edge) };
    if (keys.length === 2 && keys.includes('height') && keys.includes('width'))
      return { height: reader.size(field, size.height), width: reader.size(field, size.width) };
  }
  reader.refuse(
    field,
    `is ${JSON.stringify(value)}; supported: {"shortest_edge": n}, {"height": h, "width": w} or a number ` +
      '(longest_edge and max_size resize differently and are not supported).',
  );
}

function finish(
  reader: Reader,
  steps: Omit<ImageProcessorSpec, 'height' | 'width'>,
  sizeField: string,
): ImageProcessorSpec {
  const { resize, crop } = steps;
  for (const [field, std] of [['std', steps.std] as const]) {
    if (std?.some((v) => v === 0)) reader.refuse(field, 'has a zero: normalising would divide by zero.');
  }
  if (crop) {
    // A crop larger than the resized image pads it in transformers; only crops that never pad are served.
    const fits =
      resize &&
      ('shortestEdge' in resize
        ? crop.height <= resize.shortestEdge && crop.width <= resize.shortestEdge
        : crop.height <= resize.height && crop.width <= resize.width);
    if (!fits)
      reader.refuse(
        'crop_size',
        `(${crop.height}x${crop.width}) can be larger than the resized image (${sizeField}), which pads it; not supported.`,
      );
    return { ...steps, height: crop.height, width: crop.width };
  }
  if (resize && 'height' in resize) return { ...steps, height: resize.height, width: resize.width };
  reader.refuse(
    sizeField,
    'leaves the image size to the input (no fixed resize and no center crop): the model takes one fixed size.',
  );
}

function readClip(reader: Reader): ImageProcessorSpec {
  reader.refuseSwitches(['do_resize', 'do_center_crop', 'do_rescale', 'do_normalize', 'do_convert_rgb']);
  const resize = reader.flag('do_resize', true)
    ? readSize(reader, 'size', reader.config.size ?? { shortest_edge: 224 }, 'shortest')
    : undefined;
  const crop = reader.flag('do_center_crop', true)
    ? (readSize(reader, 'crop_size', reader.config.crop_size ?? 224, 'square') as { height: number; width: number })
    : undefined;
  if (crop && 'shortestEdge' in crop) reader.refuse('crop_size', 'must be a height and width.');
  const normalize = reader.flag('do_normalize', true);
  return finish(
    reader,
    {
      resize,
      resample: reader.resample('resample', 'bicubic'),
      crop: crop && { height: crop.height, width: crop.width, offsets: 'floor' },
      rescale: reader.flag('do_rescale', true) ? reader.number('rescale_factor', 1 / 255) : undefined,
      mean: normalize ? reader.triple('image_mean', OPENAI_CLIP_MEAN) : undefined,
      std: normalize ? reader.triple('image_std', OPENAI_CLIP_STD) : undefined,
    },
    'size',
  );
}

function readSiglip(reader: Reader): ImageProcessorSpec {
  reader.refuseSwitches(['do_resize', 'do_rescale', 'do_normalize', 'do_convert_rgb']);
  let resize: ImageProcessorSpec['resize'];
  if (reader.flag('do_resize', true)) {
    // SiglipImageProcessor reads size["height"] and size["width"]: a shortest edge (or a bare number,
    // which get_size_dict makes one) is an error there.
    resize = readSize(reader, 'size', reader.config.size ?? { height: 224, width: 224 }, 'shortest');
    if ('shortestEdge' in resize) reader.refuse('size', 'must be {"height": h, "width": w} for SigLIP.');
  }
  const normalize = reader.flag('do_normalize', true);
  return finish(
    reader,
    {
      resize,
      resample: reader.resample('resample', 'bicubic'),
      rescale: reader.flag('do_rescale', true) ? reader.number('rescale_factor', 1 / 255) : undefined,
      mean: normalize ? reader.triple('image_mean', IMAGENET_STANDARD) : undefined,
      std: normalize ? reader.triple('image_std', IMAGENET_STANDARD) : undefined,
    },
    'size',
  );
}

/**
 * jina-clip's processor runs open_clip's inference transform: Resize(size) (torchvision: the
 * shortest edge, the long side floored, by Pillow), CenterCrop(size) with rounded offsets,
 * ToTensor (x / 255 in float32, the same floats as transformers' x * (1/255)), Normalize.
 */
function readJinaClip(reader: Reader): ImageProcessorSpec {
  const raw = reader.config.size ?? 224;
  let size: number;
  if (Array.isArray(raw) && raw.length === 2 && raw[0] === raw[1]) size = reader.size('size', raw[0]);
  else if (Array.isArray(raw)) reader.refuse('size', `is ${JSON.stringify(raw)}; only a square size is supported.`);
  else size = reader.size('size', raw);
  const mode = reader.config.resize_mode ?? 'shortest';
  const interpolation = reader.config.interpolation ?? 'bicubic';
  if (interpolation !== 'bicubic' && interpolation !== 'bilinear' && interpolation !== 'random')
    reader.refuse('interpolation', `is ${JSON.stringify(interpolation)}; open_clip takes bicubic or bilinear.`);
  // open_clip maps anything but 'bilinear' (its 'random' included) to bicubic at inference.
  const resample: Resample = interpolation === 'bilinear' ? 'bilinear' : 'bicubic';
  const steps = {
    resample,
    rescale: 1 / 255,
    mean: reader.triple('mean', OPENAI_CLIP_MEAN),
    std: reader.triple('std', OPENAI_CLIP_STD),
  };
  if (mode === 'shortest')
    return finish(
      reader,
      {
        ...steps,
        resize: { shortestEdge: size },
        crop: { height: size, width: size, offsets: 'round-half-even' },
      },
      'size',
    );
  if (mode === 'squash') return finish(reader, { ...steps, resize: { height: size, width: size } }, 'size');
  reader.refuse(
    'resize_mode',
    `is ${JSON.stringify(mode)}; supported: "shortest" and "squash" ("longest" pads with fill_color).`,
  );
}

const readers: Record<string, (reader: Reader) => ImageProcessorSpec> = {
  CLIPImageProcessor: readClip,
  CLIPFeatureExtractor: readClip,
  SiglipImageProcessor: readSiglip,
  JinaCLIPImageProcessor: readJinaClip,
};

/**
 * Reads preprocessor_config.json's parsed JSON (CLIPImageProcessor, SiglipImageProcessor, ...);
 * throws an Error naming the field for what can not be done exactly (e.g. do_pad, unknown processor, resample codes).
 */
export function readImageProcessor(config: unknown, file = 'preprocessor_config.json'): ImageProcessorSpec {
  if (typeof config !== 'object' || config === null || Array.isArray(config))
    throw new ModelFilesError(`${file}: expected a JSON object.`);
  const reader: Reader = new Reader(config as Config, file);
  const type = reader.config.image_processor_type ?? reader.config.feature_extractor_type;
  if (typeof type !== 'string') reader.refuse('image_processor_type', 'is missing: which image processor is unknown.');
  const read = readers[type];
  if (!read) {
    const fast = type.endsWith('Fast') ? ' (the fast processors resize with torchvision, not Pillow)' : '';
    reader.refuse(
      'image_processor_type',
      `is ${JSON.stringify(type)}${fast}; supported: ${Object.keys(readers).join(', ')}.`,
    );
  }
  return read(reader);
}
