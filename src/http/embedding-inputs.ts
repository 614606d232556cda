/**
 * The inputs of the embedding routes, in every shape clients send them, read into core's items
 * (core/embeddings.ts: a text, an image's bytes, or text and images meant as one vector):
 * - strings and token ids, as OpenAI's API takes them (passed on unchanged);
 * - OpenAI's content parts, as vLLM takes them: `{"type": "text", "text"}` and
 *   `{"type": "image_url", "image_url": {"url"}}`, one per item, or an array of them as one item;
 * - vLLM's `messages` (`[{"role", "content": [parts]}]`): one input, the parts of every message in order;
 * - Infinity's `"modality": "image"`: each string of `input` is an image;
 * - Jina's `{"text": ...}` and `{"image": ...}` items;
 * - Cohere's `inputs[].content` parts and `images` (compat/cohere.ts).
 * Parts that are all text are one text, joined by newlines (as Cohere reads them); a single image
 * part is that image; text and images together are one fused item, which core refuses for models
 * that can not fuse them. The structure is read first, then the images are loaded (image-sources.ts):
 * a malformed request is refused before any image is decoded or fetched.
 */
import { Type } from 'typebox';
import type { EmbeddingInput, EmbeddingItem, ImageItem } from '../core/embeddings.js';
import { invalid } from '../errors.js';
import type { ImageHeader } from '../image-header.js';
import { loadImages, type ImageLoadTimings, type ImageRef, type ImageSourceOptions } from './image-sources.js';
import { LiteralUnion } from './schemas.js';

const imageSource =
  'A data URI (data:image/png;base64,...), or an http(s) URL where the server fetches them (ONNX_GATEWAY_IMAGE_URLS). PNG, JPEG or WebP.';

export const TextPart = Type.Object(
  { type: Type.Literal('text'), text: Type.String() },
  { additionalProperties: true, description: "A text (OpenAI's content part)." },
);

export const ImageUrlPart = Type.Object(
  {
    type: Type.Literal('image_url'),
    image_url: Type.Object(
      {
        url: Type.String({ description: `${imageSource} Bare base64 is taken too.` }),
        detail: Type.Optional(Type.String({ description: 'Accepted and ignored.' })),
      },
      { additionalProperties: true },
    ),
  },
  { additionalProperties: true, description: "An image (OpenAI's content part)." },
);

/**
 * Any other object passes the schema: ajv reports a failed union by its first branch ("must be
 * string"), so a malformed part is left to the parser, which names the field at fault.
 */
const OtherObject = Type.Object(
  {},
  { additionalProperties: true, description: 'Any other object is refused with a 400 naming the field at fault.' },
);

export const ContentPart = Type.Union([TextPart, ImageUrlPart, OtherObject]);

const JinaText = Type.Object({ text: Type.String() }, { additionalProperties: true, description: "A text (Jina's)." });
const JinaImage = Type.Object(
  { image: Type.String({ description: `${imageSource} Bare base64 is taken too.` }) },
  { additionalProperties: true, description: "An image (Jina's)." },
);

const EmbeddingItemSchema = Type.Union([
  Type.String(),
  TextPart,
  ImageUrlPart,
  JinaText,
  JinaImage,
  Type.Array(Type.Union([Type.String(), ContentPart]), {
    description:
      'Parts meant as one vector: text parts alone are one text (joined by newlines); one image is that image; text and images together are one fused input, which models that can not fuse them refuse (400).',
  }),
  OtherObject,
]);

/** The `input` of POST /v1/embeddings: OpenAI's texts and token ids, and items of content parts. */
export const EmbeddingsInputSchema = Type.Union(
  [
    Type.String(),
    Type.Array(Type.String()),
    Type.Array(Type.Integer()),
    Type.Array(Type.Array(Type.Integer())),
    Type.Array(EmbeddingItemSchema),
  ],
  {
    description:
      'A text, texts, token ids of the model\'s own vocabulary, or arrays of them; or items that are texts, images and parts, mixed in one request, a vector per item in order: OpenAI\'s content parts (`{"type": "text", "text"}`, `{"type": "image_url", "image_url": {"url"}}`), Jina\'s (`{"text"}`, `{"image"}`), or an array of parts as one item. With `modality` image: an image, or images. An image counts as its vision sequence length in usage (its patches, plus the class token where the model has one).',
  },
);

export const MessagesSchema = Type.Array(
  Type.Object(
    {
      role: Type.String({ description: 'Accepted; no chat template is applied.' }),
      content: Type.Union([Type.String(), Type.Array(Type.Union([Type.String(), ContentPart]))]),
    },
    { additionalProperties: true },
  ),
  {
    description:
      "vLLM's chat form, instead of input: the content of every message, in order, is one input and gets one vector.",
  },
);

export const ModalitySchema = LiteralUnion(['text', 'image'], {
  description: "Infinity's: `image` reads each string of input as an image. Default text.",
});

/** A part of an item before its images are loaded. */
type Part = string | ImageRef;
type Pending = Part | { parts: Part[] };

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function readText(value: unknown, param: string): string {
  if (typeof value !== 'string') throw invalid(param, `${param} must be a string.`);
  if (value.length === 0) throw invalid(param, `${param} must not be empty.`);
  return value;
}

/** An image's source (data URI, base64 or URL), as given in the field `param`. */
export function readImageRef(value: unknown, param: string): ImageRef {
  if (typeof value !== 'string') throw invalid(param, `${param} must be a string: ${imageSource}`);
  if (value.length === 0) throw invalid(param, `${param} must not be empty.`);
  return { source: value, param };
}

/** One content part: OpenAI's (by `type`) or Jina's (by key). */
export function readPart(value: unknown, param: string): Part {
  if (typeof value === 'string') return readText(value, param);
  if (!isRecord(value))
    throw invalid(param, `${param} must be a text or a content part ({"type": "text"} or {"type": "image_url"}).`);
  if (value.type !== undefined) {
    if (value.type === 'text') return readText(value.text, `${param}.text`);
    if (value.type === 'image_url') {
      const url = value.image_url;
      return isRecord(url) ? readImageRef(url.url, `${param}.image_url.url`) : readImageRef(url, `${param}.image_url`);
    }
    throw invalid(
      `${param}.type`,
      `${param}.type is ${JSON.stringify(value.type)}; the content parts taken are "text" and "image_url".`,
    );
  }
  const keys = ['text', 'image'].filter((key) => value[key] !== undefined);
  if (keys.length !== 1)
    throw invalid(
      param,
      keys.length === 0
        ? `${param} has no "type", "text" or "image".`
        : `${param} has both "text" and "image": send them as two items, or as two parts of one.`,
    );
  return keys[0] === 'text' ? readText(value.text, `${param}.text`) : readImageRef(value.image, `${param}.image`);
}

/** Parts meant as one vector: texts alone are one text, one image is that image, anything else is fused. */
function oneItem(parts: Part[]): Pending {
  if (parts.length === 1) return parts[0]!;
  if (parts.every((part) => typeof part === 'string')) return parts.join('\n');
  return { parts };
}

export function readParts(value: unknown[], param: string): Pending {
  if (value.length === 0) throw invalid(param, `${param} must not be an empty array of parts.`);
  return oneItem(value.map((part, j) => readPart(part, `${param}[${j}]`)));
}

function readMessages(messages: unknown[]): Pending {
  if (messages.length === 0) throw invalid('messages', 'messages must not be empty.');
  const parts = messages.flatMap((message, i): Part[] => {
    const param = `messages[${i}].content`;
    const content = isRecord(message) ? message.content : undefined;
    if (typeof content === 'string') return [readText(content, param)];
    if (!Array.isArray(content)) throw invalid(param, `${param} must be a string or an array of content parts.`);
    if (content.length === 0) throw invalid(param, `${param} must not be empty.`);
    return content.map((part, j) => readPart(part, `${param}[${j}]`));
  });
  return oneItem(parts);
}

/** What the parsers give: core's input, the header of each image in it, in order, and the time its images took. */
export interface ReadInput {
  input: EmbeddingInput;
  images: ImageHeader[];
  imageTimings?: ImageLoadTimings;
}

/** Loads the images of pending items and puts them in their places. */
export async function resolveItems(
  pending: readonly Pending[],
  options: ImageSourceOptions,
  signal?: AbortSignal,
): Promise<ReadInput> {
  const refs: ImageRef[] = [];
  const collect = (part: Part) => {
    if (typeof part !== 'string') refs.push(part);
  };
  for (const item of pending) {
    if (typeof item === 'object' && 'parts' in item) item.parts.forEach(collect);
    else collect(item);
  }
  const imageTimings: ImageLoadTimings = { base64Ms: 0, headerMs: 0 };
  const loaded = await loadImages(refs, options, signal, imageTimings);
  const images = new Map<ImageRef, ImageItem>(refs.map((ref, i) => [ref, loaded[i]!.item]));
  const place = (part: Part): string | ImageItem => (typeof part === 'string' ? part : images.get(part)!);
  const input = pending.map((item): EmbeddingItem =>
    typeof item === 'object' && 'parts' in item ? { parts: item.parts.map(place) } : place(item),
  );
  return {
    input,
    images: loaded.map(({ header }) => header),
    ...(refs.length > 0 ? { imageTimings } : {}),
  };
}

const isTokenIds = (value: unknown): boolean => Array.isArray(value) && value.every((id) => typeof id === 'number');

/** The body fields of POST /v1/embeddings that carry inputs. */
export interface EmbeddingsInputFields {
  input?: unknown;
  messages?: unknown[];
  modality?: 'text' | 'image';
}

/**
 * The input of an OpenAI-shaped embeddings body, in any of the shapes above. Texts and token ids
 * go on unchanged; anything else becomes core's items, images loaded and checked. `maxInputs`
 * bounds the items before any image is loaded.
 */
export async function readEmbeddingsInput(
  body: EmbeddingsInputFields,
  options: ImageSourceOptions & { maxInputs: number },
  signal?: AbortSignal,
): Promise<ReadInput> {
  const { input, messages, modality } = body;
  if (messages !== undefined) {
    if (input !== undefined) throw invalid('messages', 'Send input or messages, not both.');
    if (modality === 'image')
      throw invalid('modality', 'modality image reads the strings of input as images; messages say what each part is.');
    return resolveItems([readMessages(messages)], options, signal);
  }
  if (input === undefined) throw invalid('input', 'input is required (or messages).');
  if (modality === 'image') {
    const sources = typeof input === 'string' ? [input] : input;
    if (!Array.isArray(sources) || !sources.every((source) => typeof source === 'string'))
      throw invalid('input', 'With modality image, input is an image or an array of images: data URIs or URLs.');
    if (sources.length === 0) throw invalid('input', 'input must not be an empty array.');
    checkCount(sources.length, options.maxInputs, 'input');
    return resolveItems(
      sources.map((source, i) => readImageRef(source, `input[${i}]`)),
      options,
      signal,
    );
  }
  // Texts and token ids, as before there were images: core reads and checks them.
  if (
    !Array.isArray(input) ||
    input.every((item) => typeof item === 'string') ||
    isTokenIds(input) ||
    input.every(isTokenIds)
  )
    return { input: input as EmbeddingInput, images: [] };
  checkCount(input.length, options.maxInputs, 'input');
  const pending = input.map((item: unknown, i): Pending => {
    const param = `input[${i}]`;
    if (Array.isArray(item)) return readParts(item, param);
    return readPart(item, param);
  });
  return resolveItems(pending, options, signal);
}

/** More items than a request may hold are refused before any image is loaded. */
export function checkCount(count: number, maxInputs: number, param: string): void {
  if (count > maxInputs)
    throw invalid(param, `${param} has ${count} items; at most ${maxInputs} are accepted per request.`);
}
