/**
 * The image edit operation: reference images in, edited images out at the size asked.
 *
 * One request runs one pipeline (prompt.ts says which). Super-resolution and style transfer edit
 * each input image on its own (one output per input); background removal cuts out the subject of
 * one image, or with two images puts the first one's subject on the second. The pipelines are
 * deterministic, so `n` is 1: more copies of the same image would add nothing.
 */
import { invalid } from '../errors.js';
import { inSpan, recordSpan, tracer } from '../tracing/spans.js';
import { checkAnswerSize, thousands } from '../answer-size.js';
import type { ServedImageModel } from '../models/image-catalogue.js';
import { imageUsage, type ImageUsage } from './accounting.js';
import { alphaMatte, multiplyAlpha } from './background-removal.js';
import type { ImagesContext } from './context.js';
import {
  effectiveQuality,
  encoderSettings,
  fitWithin,
  formatSize,
  overlapFor,
  parseSize,
  type Background,
  type Quality,
  type Size,
} from './options.js';
import { choosePipeline } from './prompt.js';
import {
  compositeOver,
  coverCrop,
  crop,
  decodeImage,
  encode,
  probeImage,
  flattenOnColour,
  joinAlpha,
  resize,
  type DecodedImage,
  type OutputFormat,
  type Raster,
} from './raster.js';
import { superResolve } from './super-resolution.js';
import { stylise } from './style-transfer.js';
import { throwIfAborted } from './tiles.js';

/** Most reference images in one request (as OpenAI's gpt-image models). */
export const maxEditImages = 16;
const white = { r: 255, g: 255, b: 255 };

export interface EditRequest {
  /** A served image model, or absent / "auto" to let the prompt choose. */
  model?: string;
  prompt: string;
  /** Encoded images (PNG, JPEG, WebP), or how to get them: decoded only once the edit is admitted. */
  images: ImageSource[];
  n?: number;
  /** "WxH" or "auto". */
  size?: string;
  quality?: Quality;
  background?: Background;
  outputFormat?: OutputFormat;
  /** 0..100: JPEG and WebP quality. */
  outputCompression?: number;
  /**
   * Most bytes of the answer text the caller sends (the images as base64): an edit whose outputs
   * could need more is refused before it runs. One image at the largest size the limits allow is
   * always within it.
   */
  answerLimit?: number;
}

/** An encoded image, or a function that gives it (a base64 text decoded once the edit has its turn). */
export type ImageSource = Uint8Array | (() => Uint8Array);

export interface EditedImage {
  bytes: Buffer;
  size: Size;
  revisedPrompt: string;
  transparent: boolean;
}

export interface EditResult {
  created: number;
  model: string;
  images: EditedImage[];
  background: 'transparent' | 'opaque';
  outputFormat: OutputFormat;
  quality: Exclude<Quality, 'auto'>;
  size: string;
  usage: ImageUsage;
  /** Milliseconds: decoding, model runs (summed over tiles), the whole pipeline (model runs, resizes, blending), encoding. */
  timings: { decodeMs: number; inferenceMs: number; runMs: number; encodeMs: number; tiles: number };
}

interface Made {
  image: Raster;
  revisedPrompt: string;
}

export async function editImage(
  context: ImagesContext,
  request: EditRequest,
  signal?: AbortSignal,
): Promise<EditResult> {
  const { limits } = context;
  if (request.images.length === 0) throw invalid('image', 'image is required: send at least one image to edit.');
  if (request.images.length > maxEditImages)
    throw invalid('image', `At most ${maxEditImages} images per request; got ${request.images.length}.`);
  if (request.n !== undefined && request.n !== 1) {
    throw invalid(
      'n',
      'n must be 1: these pipelines are deterministic, so the same request always gives the same image; more copies would add nothing.',
    );
  }
  const format = request.outputFormat ?? 'png';
  const background = request.background ?? 'auto';
  if (background === 'transparent' && format === 'jpeg')
    throw invalid('background', 'A transparent background needs output_format png or webp; JPEG has no alpha.');
  const quality = effectiveQuality(request.quality ?? 'auto');
  const requested = parseSize(request.size, limits);
  const model = choosePipeline(context.pipelines, request.model, request.prompt);
  const chosenBy = request.model && request.model !== 'auto' ? 'named' : 'prompt';
  const task = model.manifest.task;
  if (task === 'background-removal' && request.images.length > 2) {
    throw invalid(
      'image',
      `Background removal takes one image (a cut-out) or two (the first one's subject on the second); got ${request.images.length}.`,
    );
  }
  const plan: Plan = { chosenBy, format, background, quality, requested };
  if (!tracer) return admitted(context, request, model, plan, signal);
  const attributes = {
    'gen_ai.request.model': model.id,
    'onnx_gateway.image.task': task,
    'onnx_gateway.image.inputs': request.images.length,
    'onnx_gateway.image.output_format': format,
    'onnx_gateway.image.quality': quality,
  };
  return inSpan(tracer, `image edit ${model.id}`, attributes, async (span) => {
    const result = await admitted(context, request, model, plan, signal);
    span.setAttributes({
      'onnx_gateway.image.outputs': result.images.length,
      'onnx_gateway.image.tiles': result.timings.tiles,
      'onnx_gateway.image.inference_ms': result.timings.inferenceMs,
    });
    return result;
  });
}

/** Runs the edit once it has its turn (decoded images take memory: nothing is decoded before). */
async function admitted(
  context: ImagesContext,
  request: EditRequest,
  model: ServedImageModel,
  plan: Plan,
  signal?: AbortSignal,
): Promise<EditResult> {
  const waitStarted = performance.now();
  const release = await context.admission.admit(signal);
  if (tracer) recordSpan(tracer, 'admission wait', waitStarted, performance.now(), {});
  try {
    const images = request.images.map((source) => (typeof source === 'function' ? source() : source));
    return await runEdit(context, { ...request, images }, model, plan, signal);
  } finally {
    release();
  }
}

interface Plan {
  chosenBy: 'named' | 'prompt';
  format: OutputFormat;
  background: Background;
  quality: Exclude<Quality, 'auto'>;
  requested: Size | 'auto';
}

async function runEdit(
  context: ImagesContext,
  request: EditRequest & { images: Uint8Array[] },
  model: ServedImageModel,
  plan: Plan,
  signal?: AbortSignal,
): Promise<EditResult> {
  const { limits } = context;
  const { chosenBy, format, background, quality, requested } = plan;
  const timings = { decodeMs: 0, inferenceMs: 0, runMs: 0, encodeMs: 0, tiles: 0 };
  const timed = async <T>(key: 'decodeMs' | 'runMs' | 'encodeMs', work: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    try {
      return await work();
    } finally {
      timings[key] += performance.now() - started;
    }
  };
  // Every header first: a bad image[3] is refused before image[0] is worked on.
  const headers = await timed('decodeMs', async () => {
    const sizes: Size[] = [];
    for (let i = 0; i < request.images.length; i++) {
      const { width = 0, height = 0 } = await probeImage(request.images[i]!, i, limits.maxPixels);
      sizes.push({ width, height });
    }
    return sizes;
  });
  checkEditAnswer(context, request.answerLimit, plannedOutputs(context, model, headers, requested), format);
  const decode = (i: number) =>
    timed('decodeMs', () =>
      tracer
        ? inSpan(
            tracer,
            'image decode',
            { 'onnx_gateway.image.index': i, 'onnx_gateway.image.input_bytes': request.images[i]!.byteLength },
            async (span) => {
              const decoded = await decodeImage(request.images[i]!, i, limits.maxPixels);
              span.setAttributes({
                'onnx_gateway.image.format': decoded.format,
                'onnx_gateway.image.width': decoded.rgb.width,
                'onnx_gateway.image.height': decoded.rgb.height,
                'onnx_gateway.image.alpha': decoded.alpha !== undefined,
              });
              return decoded;
            },
          )
        : decodeImage(request.images[i]!, i, limits.maxPixels),
    );
  // The model's part of the edit (with the resizes and blending around it), in an `image run` span when traced.
  const run = (inputs: DecodedImage[], work: () => Promise<Made>) =>
    timed('runMs', () =>
      tracer
        ? inSpan(
            tracer,
            `image run ${model.id}`,
            {
              'gen_ai.request.model': model.id,
              'onnx_gateway.image.input_width': inputs[0]!.rgb.width,
              'onnx_gateway.image.input_height': inputs[0]!.rgb.height,
            },
            async (span) => {
              const before = { tiles: timings.tiles, inferenceMs: timings.inferenceMs };
              const made = await work();
              span.setAttributes({
                'onnx_gateway.image.width': made.image.width,
                'onnx_gateway.image.height': made.image.height,
                'onnx_gateway.image.tiles': timings.tiles - before.tiles,
                'onnx_gateway.image.inference_ms': timings.inferenceMs - before.inferenceMs,
              });
              return made;
            },
          )
        : work(),
    );
  const overlap = overlapFor(
    quality,
    model.manifest.tile?.overlap ?? 0,
    model.manifest.input.size?.[1] ?? model.manifest.tile?.size ?? 0,
  );
  const settings = encoderSettings(quality, format, request.outputCompression);
  const note =
    chosenBy === 'named'
      ? ` The prompt was not otherwise interpreted: ${model.id} only does ${describeTask(model)}.`
      : " Chosen from the prompt's words; nothing else in the prompt was done.";

  const inputs: Size[] = [];
  const images: EditedImage[] = [];
  const finish = async (made: Made) => {
    throwIfAborted(signal);
    const bytes = await timed('encodeMs', () =>
      tracer
        ? inSpan(
            tracer,
            'image encode',
            {
              'onnx_gateway.image.format': format,
              'onnx_gateway.image.width': made.image.width,
              'onnx_gateway.image.height': made.image.height,
            },
            async (span) => {
              const encoded = await encode(made.image, settings);
              span.setAttribute('onnx_gateway.image.output_bytes', encoded.byteLength);
              return encoded;
            },
          )
        : encode(made.image, settings),
    );
    images.push({
      bytes,
      size: { width: made.image.width, height: made.image.height },
      revisedPrompt: made.revisedPrompt + note,
      transparent: made.image.channels === 4,
    });
  };
  if (model.manifest.task === 'background-removal') {
    const decoded: DecodedImage[] = [];
    for (let i = 0; i < request.images.length; i++) decoded.push(await decode(i));
    inputs.push(...decoded.map((d) => ({ width: d.rgb.width, height: d.rgb.height })));
    await finish(
      await run(decoded, () =>
        removeBackground(context, model, decoded, requested, background, format, timings, signal),
      ),
    );
  } else {
    // One image at a time, so only one decoded image and its result are held at once.
    for (let i = 0; i < request.images.length; i++) {
      const decoded = await decode(i);
      inputs.push({ width: decoded.rgb.width, height: decoded.rgb.height });
      throwIfAborted(signal);
      await finish(
        await run([decoded], () =>
          editOne(context, model, decoded, i, requested, overlap, background, format, timings, signal),
        ),
      );
    }
  }

  return {
    created: Math.floor(Date.now() / 1000),
    model: model.id,
    images,
    background: images.some((image) => image.transparent) ? 'transparent' : 'opaque',
    outputFormat: format,
    quality,
    // With `auto` and inputs of different sizes, each output's size, in order.
    size: [...new Set(images.map((image) => formatSize(image.size)))].join(','),
    usage: imageUsage(
      context.countTextTokens(request.prompt),
      inputs,
      images.map((image) => image.size),
    ),
    timings,
  };
}

/** The sizes of the images an edit makes, from its inputs' headers and the size asked. */
function plannedOutputs(
  context: ImagesContext,
  model: ServedImageModel,
  inputs: Size[],
  requested: Size | 'auto',
): Size[] {
  const { manifest } = model;
  if (manifest.task === 'background-removal') {
    // One image: the cut-out's size, or the scene's with two.
    return [requested === 'auto' ? fitWithin(inputs[inputs.length - 1]!, context.limits) : requested];
  }
  return inputs.map((input) =>
    requested === 'auto'
      ? fitWithin({ width: input.width * manifest.scale, height: input.height * manifest.scale }, context.limits)
      : requested,
  );
}

/** Most bytes of one output image in the answer: its raw pixels (PNG's worst case), as base64, with its description. */
function imageAnswerBytes(size: Size, format: OutputFormat): number {
  const channels = format === 'jpeg' ? 3 : 4;
  const encoded = Math.ceil(size.width * size.height * channels * 1.01) + size.height + 4096;
  return Math.ceil(encoded / 3) * 4 + 4096;
}

function checkEditAnswer(
  context: ImagesContext,
  limit: number | undefined,
  outputs: Size[],
  format: OutputFormat,
): void {
  if (limit === undefined) return;
  const { maxPixels, maxEdge } = context.limits;
  const side = Math.min(maxEdge, Math.floor(Math.sqrt(maxPixels)));
  const largest = imageAnswerBytes({ width: side, height: Math.floor(maxPixels / side) }, format);
  const pixels = outputs.reduce((sum, size) => sum + size.width * size.height, 0);
  checkAnswerSize(Math.max(limit, largest), {
    what: 'images',
    param: 'image',
    perInput: outputs.map((size) => imageAnswerBytes(size, format)),
    detail: `${outputs.length} ${format} images of ${thousands(pixels)} pixels together, ${outputs.map(formatSize).join(', ')}`,
  });
}

function describeTask(model: ServedImageModel): string {
  switch (model.manifest.task) {
    case 'super-resolution':
      return `x${model.manifest.scale} super-resolution`;
    case 'background-removal':
      return 'background removal';
    case 'style-transfer':
      return `style transfer in the "${model.manifest.style}" style`;
  }
}

/** The centre of `image` with the target's aspect ratio, and what was done to get it. */
async function cropToAspect(image: Raster, target: Size, index: number): Promise<{ image: Raster; note: string }> {
  const region = coverCrop(image.width, image.height, target.width, target.height);
  if (region.width === image.width && region.height === image.height) return { image, note: '' };
  const cropped = await crop(image, region.left, region.top, region.width, region.height);
  return {
    image: cropped,
    note: `Cropped image[${index}] from ${image.width}x${image.height} to its centre ${region.width}x${region.height} to match the requested aspect ratio. `,
  };
}

/** Alpha, opacity and format: keeps the image's transparency unless an opaque result is asked for or the format has no alpha. */
async function finish(
  rgb: Raster,
  alpha: Raster | undefined,
  background: Background,
  format: OutputFormat,
): Promise<{ image: Raster; note: string }> {
  if (!alpha) return { image: rgb, note: '' };
  const rgba = joinAlpha(rgb, alpha);
  if (background === 'opaque' || format === 'jpeg') {
    return {
      image: await flattenOnColour(rgba, white),
      note: ` Transparent pixels were flattened onto white (${background === 'opaque' ? 'background "opaque"' : 'JPEG has no alpha'}).`,
    };
  }
  return { image: rgba, note: '' };
}

async function editOne(
  context: ImagesContext,
  model: ServedImageModel,
  decoded: DecodedImage,
  index: number,
  requested: Size | 'auto',
  overlap: number,
  background: Background,
  format: OutputFormat,
  progress: { inferenceMs: number; tiles: number },
  signal?: AbortSignal,
): Promise<Made> {
  const { manifest } = model;
  const source = decoded.rgb;
  const auto = { width: source.width * manifest.scale, height: source.height * manifest.scale };
  const target = requested === 'auto' ? fitWithin(auto, context.limits) : requested;
  const { image, note: cropNote } = await cropToAspect(source, target, index);
  let alpha: Raster | undefined;
  if (decoded.alpha) {
    const region = coverCrop(source.width, source.height, target.width, target.height);
    alpha = await resize(
      await crop(decoded.alpha, region.left, region.top, region.width, region.height),
      target.width,
      target.height,
    );
  }

  let description: string;
  let rgb: Raster;
  if (manifest.task === 'super-resolution') {
    const result = await superResolve(context, model, image, target, { overlap, signal });
    progress.inferenceMs += result.inferenceMs;
    progress.tiles += result.tiles;
    rgb = result.image;
    if (result.passes.length === 0) {
      description = `The requested size ${formatSize(target)} is not larger than image[${index}] (${image.width}x${image.height}), so no model ran: resized with lanczos3.`;
    } else {
      const passes = result.passes.map((p) => formatSize(p)).join(', then ');
      description = `Upscaled image[${index}] from ${image.width}x${image.height} to ${formatSize(target)} with ${model.id} (x${manifest.scale} super-resolution, ${result.passes.length} pass${result.passes.length > 1 ? 'es' : ''} on ${passes}, ${result.tiles} tiles), then resized to exactly ${formatSize(target)} with lanczos3.`;
    }
    if (alpha) description += ' The alpha channel was resized with lanczos3.';
  } else {
    const result = await stylise(context, model, image, target, { overlap, signal });
    progress.inferenceMs += result.inferenceMs;
    progress.tiles += result.tiles;
    rgb = result.image;
    description = `Restyled image[${index}] in the "${manifest.style}" style with ${model.id} at ${formatSize(result.working)} (${result.tiles} tiles), then resized to ${formatSize(target)} with lanczos3.`;
    if (alpha) description += ' The alpha channel was kept.';
  }
  const finished = await finish(rgb, alpha, background, format);
  return { image: finished.image, revisedPrompt: cropNote + description + finished.note };
}

async function removeBackground(
  context: ImagesContext,
  model: ServedImageModel,
  decoded: DecodedImage[],
  requested: Size | 'auto',
  background: Background,
  format: OutputFormat,
  progress: { inferenceMs: number; tiles: number },
  signal?: AbortSignal,
): Promise<Made> {
  const subject = decoded[0]!;
  if (decoded.length === 1) {
    const target =
      requested === 'auto'
        ? fitWithin({ width: subject.rgb.width, height: subject.rgb.height }, context.limits)
        : requested;
    const { image, note: cropNote } = await cropToAspect(subject.rgb, target, 0);
    const region = coverCrop(subject.rgb.width, subject.rgb.height, target.width, target.height);
    const matte = await alphaMatte(context, model, image, signal);
    progress.inferenceMs += matte.inferenceMs;
    progress.tiles += 1;
    const own = subject.alpha
      ? await crop(subject.alpha, region.left, region.top, region.width, region.height)
      : undefined;
    const alpha = own ? multiplyAlpha(matte.alpha, own) : matte.alpha;
    const [h, w] = model.manifest.input.size ?? [image.height, image.width];
    let description = `Removed the background of image[0] with ${model.id} (alpha matte computed at ${w}x${h}, resized to ${image.width}x${image.height})`;
    const cutout = await resize(joinAlpha(image, alpha), target.width, target.height);
    description +=
      target.width === image.width && target.height === image.height
        ? '.'
        : `, then resized to ${formatSize(target)} with lanczos3.`;
    if (background === 'opaque' || format === 'jpeg') {
      const why = background === 'opaque' ? 'background "opaque"' : 'JPEG has no alpha';
      return {
        image: await flattenOnColour(cutout, white),
        revisedPrompt: `${cropNote}${description} The subject was placed on white (${why}).`,
      };
    }
    return { image: cutout, revisedPrompt: `${cropNote}${description} The background is transparent.` };
  }

  // Two images: the first one's subject, scaled to fit and centred, over the second.
  const scene = decoded[1]!;
  const target =
    requested === 'auto' ? fitWithin({ width: scene.rgb.width, height: scene.rgb.height }, context.limits) : requested;
  const matte = await alphaMatte(context, model, subject.rgb, signal);
  progress.inferenceMs += matte.inferenceMs;
  progress.tiles += 1;
  throwIfAborted(signal);
  const alpha = subject.alpha ? multiplyAlpha(matte.alpha, subject.alpha) : matte.alpha;
  const fit = Math.min(target.width / subject.rgb.width, target.height / subject.rgb.height);
  const subjectSize = {
    width: Math.max(1, Math.min(target.width, Math.round(subject.rgb.width * fit))),
    height: Math.max(1, Math.min(target.height, Math.round(subject.rgb.height * fit))),
  };
  const cutout = await resize(joinAlpha(subject.rgb, alpha), subjectSize.width, subjectSize.height);

  const { image: sceneRgb, note: cropNote } = await cropToAspect(scene.rgb, target, 1);
  const region = coverCrop(scene.rgb.width, scene.rgb.height, target.width, target.height);
  const sceneAlpha = scene.alpha
    ? await resize(
        await crop(scene.alpha, region.left, region.top, region.width, region.height),
        target.width,
        target.height,
      )
    : undefined;
  const base = await resize(sceneRgb, target.width, target.height);
  let composed = await compositeOver(cutout, sceneAlpha ? joinAlpha(base, sceneAlpha) : base);
  let note = '';
  if (composed.channels === 4 && (background === 'opaque' || format === 'jpeg')) {
    composed = await flattenOnColour(composed, white);
    note = ' Transparent pixels of image[1] were flattened onto white.';
  }
  throwIfAborted(signal);
  return {
    image: composed,
    revisedPrompt: `${cropNote}Cut out the subject of image[0] with ${model.id} and placed it, scaled to ${formatSize(subjectSize)} and centred, on image[1] resized to ${formatSize(target)} with lanczos3.${note}`,
  };
}
