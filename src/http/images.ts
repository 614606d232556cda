/**
 * POST /v1/images/edits: OpenAI's image edit request, as JSON (images as base64 or data URIs) or
 * as multipart/form-data (what the OpenAI SDK's `images.edit` sends: files under `image` or
 * `image[]`, every other field as text). Both become one EditRequest for images/.
 */
import multipart, { type MultipartFile } from '@fastify/multipart';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from 'typebox';
import type { FastifyRequest } from 'fastify';
import { editImage, maxEditImages, type EditRequest, type EditResult, type ImageSource } from '../images/edit.js';
import type { ImagesContext } from '../images/context.js';
import { ApiError, invalid } from '../errors.js';
import { sendJsonText } from './json-text.js';
import type { HttpServices } from './services.js';
import { errorResponses, responseHeaders, withHeaders } from './schemas.js';
import { editPhases, reportTimings } from './timing.js';

/** What the images routes are given by whoever composes the server. */
export interface ImagesService {
  context: ImagesContext;
  /** Largest request body: the JSON document, or a form's files together. */
  bodyLimit: number;
}

const Quality = Type.Union([Type.Literal('low'), Type.Literal('medium'), Type.Literal('high'), Type.Literal('auto')], {
  description: 'Tile overlap (wider blends seams over more pixels) and encoder effort; `auto` is `medium`.',
});
const Background = Type.Union([Type.Literal('transparent'), Type.Literal('opaque'), Type.Literal('auto')], {
  description:
    '`opaque` flattens transparent pixels onto white; `auto` keeps transparency the output has (PNG and WebP).',
});
const OutputFormat = Type.Union([Type.Literal('png'), Type.Literal('jpeg'), Type.Literal('webp')], { default: 'png' });
const ResponseFormat = Type.Union([Type.Literal('b64_json'), Type.Literal('url')], {
  description: '`b64_json`: plain base64; `url`: a data URI (`data:image/png;base64,...`). Default b64_json.',
});
const Moderation = Type.Union([Type.Literal('low'), Type.Literal('auto')], {
  description: 'Accepted for compatibility; no moderation model runs here.',
});

const common = {
  prompt: Type.String({
    maxLength: 32_000,
    description:
      'What to do. Picks the pipeline when `model` is absent or "auto" (see docs/images.md); `revised_prompt` says what was done.',
  }),
  model: Type.Optional(Type.String({ description: 'A served image model id, or "auto" (the prompt picks).' })),
  size: Type.Optional(
    Type.String({ description: '"WIDTHxHEIGHT" (such as 2048x2048, 3840x2160, 4096x4096) or "auto".' }),
  ),
  quality: Type.Optional(Quality),
  background: Type.Optional(Background),
  output_format: Type.Optional(OutputFormat),
  response_format: Type.Optional(ResponseFormat),
  moderation: Type.Optional(Moderation),
  user: Type.Optional(Type.String()),
};

const EditJson = Type.Object(
  {
    ...common,
    image: Type.Union([Type.String(), Type.Array(Type.String(), { minItems: 1, maxItems: maxEditImages })], {
      description: 'Images to edit: base64 (PNG, JPEG or WebP; other formats 415), with or without a `data:` prefix.',
    }),
    n: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 10, description: 'Must be 1: the pipelines are deterministic.' }),
    ),
    output_compression: Type.Optional(
      Type.Integer({ minimum: 0, maximum: 100, description: 'JPEG and WebP quality (0..100).' }),
    ),
  },
  { additionalProperties: true },
);
type EditJson = Static<typeof EditJson>;

const integerText = Type.String({ pattern: '^\\s*\\d{1,3}\\s*$' });
const EditForm = Type.Object(
  {
    ...common,
    image: Type.Optional(Type.Unknown({ description: 'Image file(s): PNG, JPEG or WebP.' })),
    'image[]': Type.Optional(Type.Unknown({ description: 'Image files (the OpenAI SDK names an array of files so).' })),
    n: Type.Optional(integerText),
    output_compression: Type.Optional(integerText),
  },
  { additionalProperties: true },
);
type EditForm = Static<typeof EditForm>;

const EditResponse = Type.Object({
  created: Type.Integer(),
  data: Type.Array(
    Type.Object({
      b64_json: Type.Optional(Type.String()),
      url: Type.Optional(Type.String()),
      revised_prompt: Type.String(),
    }),
  ),
  background: Type.Union([Type.Literal('transparent'), Type.Literal('opaque')]),
  output_format: OutputFormat,
  quality: Type.Union([Type.Literal('low'), Type.Literal('medium'), Type.Literal('high')]),
  size: Type.String(),
  usage: Type.Object({
    input_tokens: Type.Integer(),
    input_tokens_details: Type.Object({ image_tokens: Type.Integer(), text_tokens: Type.Integer() }),
    output_tokens: Type.Integer(),
    output_tokens_details: Type.Object({ image_tokens: Type.Integer(), text_tokens: Type.Integer() }),
    total_tokens: Type.Integer(),
  }),
});

const mimeTypes = { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp' } as const;
const base64Text = /^[A-Za-z0-9+/_-]*={0,2}$/;

/** A base64 image or data URI to bytes; `index` names it in errors. */
export function decodeBase64Image(value: string, index: number): Uint8Array {
  const param = `image[${index}]`;
  let text = value.trim();
  if (/^https?:\/\//i.test(text))
    throw new ApiError(
      'invalid_image',
      `${param} is a URL; this server does not fetch images: send the image itself as base64 or a data URI.`,
      { param },
    );
  if (text.startsWith('data:')) {
    const comma = text.indexOf(',');
    if (comma < 0 || !/;base64$/i.test(text.slice(0, comma)))
      throw new ApiError('invalid_image', `${param} is a data URI that is not base64-encoded.`, { param });
    text = text.slice(comma + 1);
  }
  text = text.replace(/\s+/g, '');
  if (text.length === 0 || !base64Text.test(text))
    throw new ApiError('invalid_image', `${param} is not base64.`, { param });
  return Buffer.from(text, 'base64');
}

/** Base64 is decoded only once the edit has its turn: a waiting or refused edit holds no decoded copy. */
const later =
  (value: string, index: number): ImageSource =>
  () =>
    decodeBase64Image(value, index);

function fromJson(body: EditJson): EditRequest {
  const images = Array.isArray(body.image) ? body.image : [body.image];
  return {
    model: body.model,
    prompt: body.prompt,
    images: images.map(later),
    n: body.n,
    size: body.size,
    quality: body.quality,
    background: body.background,
    outputFormat: body.output_format,
    outputCompression: body.output_compression,
  };
}

function fromForm(body: EditForm): EditRequest {
  const values = [body.image, body['image[]']].flatMap((value): unknown[] =>
    value === undefined ? [] : Array.isArray(value) ? (value as unknown[]) : [value],
  );
  const images = values.map((value, index): ImageSource => {
    if (Buffer.isBuffer(value)) return value;
    if (typeof value === 'string') return later(value, index);
    throw new ApiError('invalid_image', `image[${index}] is neither a file nor base64 text.`, {
      param: `image[${index}]`,
    });
  });
  const integer = (value: string | undefined) => (value === undefined ? undefined : Number(value.trim()));
  const compression = integer(body.output_compression);
  if (compression !== undefined && compression > 100)
    throw invalid('output_compression', 'output_compression must be 0..100.');
  return {
    model: body.model,
    prompt: body.prompt,
    images,
    n: integer(body.n),
    size: body.size,
    quality: body.quality,
    background: body.background,
    outputFormat: body.output_format,
    outputCompression: compression,
  };
}

/** Fields clients may send that would change the result in ways these pipelines can not honour. */
function refuseUnsupported(body: Record<string, unknown>): void {
  if (body.mask !== undefined)
    throw invalid('mask', 'Masks are not supported: every pipeline here edits the whole image.');
  if (body.stream === true || body.stream === 'true')
    throw invalid('stream', 'Streaming partial images is not supported: the edited image comes back whole.');
}

export function serializeEdit(result: EditResult, responseFormat: 'b64_json' | 'url'): string {
  const mime = mimeTypes[result.outputFormat];
  const data = result.images.map((image) => {
    const base64 = image.bytes.toString('base64');
    const value = responseFormat === 'url' ? `"url":"data:${mime};base64,${base64}"` : `"b64_json":"${base64}"`;
    return `{${value},"revised_prompt":${JSON.stringify(image.revisedPrompt)}}`;
  });
  const rest = JSON.stringify({
    background: result.background,
    output_format: result.outputFormat,
    quality: result.quality,
    size: result.size,
    usage: result.usage,
  });
  return `{"created":${result.created},"data":[${data.join(',')}],${rest.slice(1)}`;
}

/** Form files count against the body limit together, like the bytes of a JSON body. */
const formBytes = new WeakMap<FastifyRequest, number>();

export const imagesRoutes: FastifyPluginAsyncTypebox<HttpServices> = async (app, { images, config }) => {
  const bodyLimit = images?.bodyLimit ?? 128 * 1024 * 1024;
  const answerLimit = config.maxResponseMb * 1024 * 1024;
  await app.register(multipart, {
    attachFieldsToBody: 'keyValues',
    // One byte over the body limit: a larger file reaches the running total below, which refuses it.
    limits: { fileSize: bodyLimit + 1, files: maxEditImages + 1, fields: 64, fieldSize: 1024 * 1024, parts: 128 },
    async onFile(this: FastifyRequest, part: MultipartFile) {
      // Counted as it arrives: the form is refused the moment its files pass the limit, not once a file is whole.
      const chunks: Buffer[] = [];
      let total = formBytes.get(this) ?? 0;
      for await (const chunk of part.file as AsyncIterable<Buffer>) {
        total += chunk.length;
        if (total > bodyLimit)
          throw new ApiError(
            'payload_too_large',
            `The image files come to more than ${bodyLimit} bytes (ONNX_GATEWAY_IMAGE_BODY_LIMIT).`,
          );
        chunks.push(chunk);
      }
      formBytes.set(this, total);
      (part as MultipartFile & { value?: Buffer }).value = Buffer.concat(chunks);
    },
  });

  app.post(
    '/v1/images/edits',
    {
      bodyLimit,
      schema: {
        tags: ['Images'],
        summary: 'Edit images (super-resolution, background removal, style transfer)',
        body: { content: { 'application/json': { schema: EditJson }, 'multipart/form-data': { schema: EditForm } } },
        response: { 200: withHeaders(EditResponse, responseHeaders.timing), ...errorResponses },
      },
    },
    async (request, reply) => {
      if (!images)
        throw new ApiError('model_not_found', 'No image models are served here (set ONNX_GATEWAY_IMAGE_MODELS).', {
          param: 'model',
        });
      const body = request.body as Record<string, unknown>;
      refuseUnsupported(body);
      const edit = request.isMultipart() ? fromForm(body as EditForm) : fromJson(body as EditJson);
      const result = await editImage(images.context, { ...edit, answerLimit }, request.clientSignal);
      reportTimings(reply, editPhases(result.timings));
      reply.header('x-image-model', result.model);
      const responseFormat = (body.response_format as 'b64_json' | 'url' | undefined) ?? 'b64_json';
      return sendJsonText(reply, serializeEdit(result, responseFormat));
    },
  );
};
