/**
 * Embeddings of requests that hold images: texts and images mixed in one request, one vector per
 * item in input order, through an image-text model's two towers. Each image's bytes are checked
 * from their header (format, size, pixels) before anything is queued; the decode and the
 * preprocessing run in the vision tower's worker. An image counts for the tower's sequence length
 * in `promptTokens`. Image vectors are cached like texts', keyed by a sha256 of the bytes and the
 * vision tower's identity. An item that fuses text and images into one vector is refused: no
 * model served here fuses them.
 */
import { settings } from '../config.js';
import { invalid } from '../errors.js';
import { checkImageBytes } from '../image-header.js';
import type { ServedModel } from '../models/registry.js';
import type { CoreContext } from './context.js';
import {
  embedTexts,
  type EmbeddedRows,
  type EmbeddingInput,
  type EmbeddingItem,
  type EmbedRequest,
  type FusedItem,
  type ImageItem,
} from './embeddings.js';

const isObject = (item: unknown): item is object => typeof item === 'object' && item !== null && !Array.isArray(item);

/** A request's items when it holds images (or fused items); undefined for texts and token ids alone. */
export function multimodalItems(input: EmbeddingInput): EmbeddingItem[] | undefined {
  if (!Array.isArray(input) || !input.some(isObject)) return undefined;
  return input as EmbeddingItem[];
}

function isImage(item: EmbeddingItem): item is ImageItem {
  return isObject(item) && 'image' in item;
}

function isFused(item: EmbeddingItem): item is FusedItem {
  return isObject(item) && 'parts' in item;
}

/** Rows of a request's text and image items, in input order. */
export async function embedItems(
  ctx: CoreContext,
  model: ServedModel,
  request: EmbedRequest,
  items: EmbeddingItem[],
  signal?: AbortSignal,
): Promise<{ job: EmbeddedRows; count: number; promptTokens: number; tokenizeMs: number }> {
  const count = items.length;
  if (count > ctx.limits.maxInputs)
    throw invalid('input', `input has ${count} items; at most ${ctx.limits.maxInputs} are accepted per request.`);
  const textAt: number[] = [];
  const imageAt: number[] = [];
  items.forEach((item, i) => {
    if (typeof item === 'string') textAt.push(i);
    else if (isFused(item)) {
      throw invalid(
        `input[${i}]`,
        `The model "${model.id}" can not embed text and images as one vector; send each text and each image as an item of its own (one vector each).`,
      );
    } else if (isImage(item) && item.image instanceof Uint8Array) imageAt.push(i);
    else throw invalid(`input[${i}]`, `input[${i}] is neither a text nor an image.`);
  });
  const images = model.images;
  if (imageAt.length > 0 && !images) {
    throw invalid(
      `input[${imageAt[0]}]`,
      `The model "${model.id}" embeds texts only; send images to an image-text model (CLIP, SigLIP, jina-clip).`,
    );
  }
  const limits = {
    maxBytes: ctx.limits.embeddingImageMaxBytes ?? settings.embeddingImageMaxBytes.default!,
    maxPixels: ctx.limits.imageMaxPixels ?? settings.imageMaxPixels.default!,
  };
  // Each image's header, before any of the request is queued.
  for (const i of imageAt) checkImageBytes((items[i] as ImageItem).image, limits, `input[${i}]`);

  // The images go first: their bytes reach the preprocessing threads before the texts are
  // tokenised here, and the tokenize phase times tokenising, not the images' hashing and queueing.
  const [pictures, texts] = await Promise.all([
    imageAt.length > 0
      ? embedImages(
          ctx,
          images!.tower,
          images!.sequenceLength,
          imageAt.map((i) => ({ bytes: (items[i] as ImageItem).image, param: `input[${i}]` })),
          signal,
        )
      : undefined,
    textAt.length > 0
      ? embedTexts(
          ctx,
          model,
          { ...request, input: textAt.map((i) => items[i] as string) },
          signal,
          (j) => `input[${textAt[j]}]`,
        )
      : undefined,
  ]);

  const width = texts?.job.width || pictures?.width || model.dimensions;
  const output = new Float32Array(count * width);
  textAt.forEach((i, j) => output.set(texts!.job.output.subarray(j * width, (j + 1) * width), i * width));
  imageAt.forEach((i, j) => output.set(pictures!.output.subarray(j * width, (j + 1) * width), i * width));
  const parts = [texts?.job, pictures].filter((part): part is EmbeddedRows => part !== undefined);
  const hits = parts.some((part) => part.hits !== undefined)
    ? parts.reduce((sum, part) => sum + (part.hits ?? 0), 0)
    : undefined;
  return {
    job: {
      output,
      width,
      hits,
      queueMs: Math.max(...parts.map((part) => part.queueMs)),
      loadMs: Math.max(...parts.map((part) => part.loadMs)),
      inferenceMs: parts.reduce((sum, part) => sum + part.inferenceMs, 0),
      preprocessMs: pictures?.preprocessMs,
    },
    count,
    promptTokens: (texts?.promptTokens ?? 0) + imageAt.length * images!.sequenceLength,
    tokenizeMs: texts?.tokenizeMs ?? 0,
  };
}

/** Image rows from the cache and the vision tower. */
async function embedImages(
  ctx: CoreContext,
  tower: ServedModel,
  tokens: number,
  images: Array<{ bytes: Uint8Array; param: string }>,
  signal?: AbortSignal,
): Promise<EmbeddedRows> {
  // The worker takes each image's buffer whole: an image that shares its buffer is copied first.
  const seen = new Set<ArrayBufferLike>();
  const owned = images.map(({ bytes, param }) => {
    const whole =
      bytes.byteOffset === 0 &&
      bytes.byteLength === bytes.buffer.byteLength &&
      bytes.buffer instanceof ArrayBuffer &&
      !seen.has(bytes.buffer);
    seen.add(bytes.buffer);
    return { bytes: whole ? bytes : bytes.slice(), param };
  });
  const params = new Map(owned.map(({ bytes, param }) => [bytes, param]));
  const compute = (missing: Uint8Array[]) =>
    ctx.scheduler.submit(
      tower.id,
      missing.map((bytes) => ({ ids: new Int32Array(0), image: { bytes, tokens, param: params.get(bytes)! } })),
      signal,
    );
  const bytes = owned.map((image) => image.bytes);
  return ctx.embeddingCache ? ctx.embeddingCache.run(tower, bytes, compute) : compute(bytes);
}
