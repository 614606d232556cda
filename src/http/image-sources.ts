/**
 * The images of an embedding request, as clients name them: a data URI
 * (`data:image/png;base64,...`), bare base64 (Jina's API takes it), or an http(s) URL, fetched only
 * where the imageUrls setting allows it, through the web reader's guarded fetch (its address policy:
 * no private, loopback or link-local addresses unless readerAllowPrivate; its time limit). Every
 * image's bytes are checked (image-header.ts) before core receives them, so no decoder sees a file
 * over the limits or of another format.
 */
import { settings, type Config } from '../config.js';
import type { ImageItem } from '../core/embeddings.js';
import { ApiError } from '../errors.js';
import { checkImageBytes, type ImageHeader, type ImageLimits } from '../image-header.js';
import { fetchBody, readerRedirects, type FetchLimits, type FetchTarget } from '../search/reader/fetch-page.js';

/** An image named in a request, not yet decoded: the text that names it and the field it came from. */
export interface ImageRef {
  source: string;
  param: string;
}

/** An image's bytes, checked, and what its header says. */
export interface LoadedImage {
  item: ImageItem;
  header: ImageHeader;
}

/** Main-thread time a request's images took before core received them: base64 to bytes, and the header checks. */
export interface ImageLoadTimings {
  base64Ms: number;
  headerMs: number;
}

/** Image URLs fetched at once for one request: enough to overlap the waits, few enough not to flood a host. */
const fetchesAtOnce = 4;
const accept = 'image/png,image/jpeg,image/webp,*/*;q=0.1';

const base64Text = /^[A-Za-z0-9+/_-]+={0,2}$/;
const isUrl = (source: string) => /^https?:\/\//i.test(source);

function invalidImage(param: string, message: string): ApiError {
  return new ApiError('invalid_image', message, { param });
}

/**
 * Bytes in an ArrayBuffer of their own: Node hands out small Buffers as views of a shared pool,
 * which a transfer to a worker thread would detach under every other Buffer in it.
 */
function ownBytes(buffer: Buffer): Uint8Array {
  return buffer.byteOffset === 0 && buffer.byteLength === buffer.buffer.byteLength
    ? new Uint8Array(buffer.buffer)
    : new Uint8Array(buffer);
}

/** A data URI or bare base64 to bytes (not yet checked as an image). */
export function decodeImageText(source: string, param: string): Uint8Array {
  let text = source;
  if (/^data:/i.test(source)) {
    const comma = source.indexOf(',');
    if (comma < 0) throw invalidImage(param, `${param} is a data URI without data.`);
    const [mediaType = '', ...parameters] = source.slice(5, comma).toLowerCase().split(';');
    if (!parameters.some((parameter) => parameter.trim() === 'base64'))
      throw invalidImage(param, `${param} is a data URI that is not base64-encoded.`);
    const type = mediaType.trim();
    // The bytes tell the format (a data URI's type is often wrong); a type that is not an image is a mistake.
    if (type !== '' && !type.startsWith('image/') && type !== 'application/octet-stream')
      throw invalidImage(param, `${param} is a data URI of ${type}, not an image.`);
    text = source.slice(comma + 1);
  }
  const bytes = decodePlainBase64(text);
  if (bytes) return bytes;
  // Line breaks are allowed in base64 (MIME wraps it); the copy without them is made only here.
  text = text.replace(/\s+/g, '');
  if (text.length === 0) throw invalidImage(param, `${param} has no image data.`);
  if (!base64Text.test(text) || text.length % 4 === 1)
    throw invalidImage(
      param,
      `${param} is neither base64, a data URI (data:image/png;base64,...) nor an http(s) URL of an image.`,
    );
  return ownBytes(Buffer.from(text, 'base64'));
}

/**
 * Base64 of nothing but its alphabet (either one) and up to two `=` at the end, decoded; undefined
 * for any other text. Node's decoder skips what is not base64, so the text is checked by what it
 * decodes to rather than scanned first (a photo's text is a megabyte or more): with 4n, 4n + 2 or
 * 4n + 3 characters of data, each character skipped leaves fewer bytes than that count promises.
 */
function decodePlainBase64(text: string): Uint8Array | undefined {
  let padding = 0;
  while (padding < 3 && text.charCodeAt(text.length - 1 - padding) === 0x3d) padding++;
  const data = text.length - padding;
  // No base64 has 4n + 1 characters of data: below that count, one skipped could go unseen.
  if (padding > 2 || data <= 0 || data % 4 === 1 || text.length % 4 === 1) return undefined;
  const bytes = Buffer.from(text, 'base64');
  return bytes.length === Math.floor((data * 3) / 4) ? ownBytes(bytes) : undefined;
}

export interface ImageSourceOptions {
  limits: ImageLimits;
  /** All images of one request together, in bytes: the body limit, which bounds those sent in the body. */
  maxTotalBytes: number;
  /** How image URLs are fetched; undefined: they are refused. */
  urls?: Omit<FetchLimits, 'maxBytes'>;
}

/** The options of the embedding routes, from the configuration. */
export function imageSourceOptions(
  config: Pick<
    Config,
    'embeddingImageMaxBytes' | 'imageMaxPixels' | 'bodyLimit' | 'imageUrls' | 'readerAllowPrivate' | 'readerTimeout'
  >,
): ImageSourceOptions {
  return {
    limits: { maxBytes: config.embeddingImageMaxBytes, maxPixels: config.imageMaxPixels },
    maxTotalBytes: config.bodyLimit,
    urls: config.imageUrls
      ? { timeoutMs: config.readerTimeout, maxRedirects: readerRedirects, allowPrivate: config.readerAllowPrivate }
      : undefined,
  };
}

async function fetchImage(ref: ImageRef, options: ImageSourceOptions, signal: AbortSignal): Promise<Uint8Array> {
  const { param } = ref;
  const maxBytes = options.limits.maxBytes;
  const setting = settings.embeddingImageMaxBytes.env;
  const target: FetchTarget = {
    what: `image of ${param}`,
    subject: `the URL of ${param}`,
    param,
    accept,
    tooLarge: (limit, size) =>
      new ApiError(
        'payload_too_large',
        size === undefined
          ? `${param} is larger than ${limit} bytes, the limit for an image (${setting}).`
          : `${param} is ${size} bytes, over the limit of ${limit} bytes for an image (${setting}).`,
        { param },
      ),
  };
  const fetched = await fetchBody(ref.source, { ...options.urls!, maxBytes }, target, signal);
  return ownBytes(fetched.body);
}

/**
 * Each image's bytes, in the order of `refs`, checked: those in the request first (decoded and
 * checked before any URL is fetched), then the URLs, a few at a time; the first failure stops the
 * fetches still running. `timings`, when given, gets the time the decoding and the checks took.
 */
export async function loadImages(
  refs: readonly ImageRef[],
  options: ImageSourceOptions,
  signal?: AbortSignal,
  timings?: ImageLoadTimings,
): Promise<LoadedImage[]> {
  const loaded = new Array<LoadedImage>(refs.length);
  const check = (bytes: Uint8Array, ref: ImageRef, i: number) => {
    const started = performance.now();
    loaded[i] = { item: { image: bytes }, header: checkImageBytes(bytes, options.limits, ref.param) };
    if (timings) timings.headerMs += performance.now() - started;
  };
  const decode = (ref: ImageRef): Uint8Array => {
    const started = performance.now();
    const bytes = decodeImageText(ref.source, ref.param);
    if (timings) timings.base64Ms += performance.now() - started;
    return bytes;
  };
  const fetches: number[] = [];
  refs.forEach((ref, i) => {
    if (!isUrl(ref.source)) return check(decode(ref), ref, i);
    if (!options.urls)
      throw invalidImage(
        ref.param,
        `${ref.param} is an image URL; this server fetches image URLs only with ${settings.imageUrls.env}=true: send the image itself as a data URI (data:image/png;base64,...).`,
      );
    fetches.push(i);
  });
  if (fetches.length === 0) return loaded;

  const stop = new AbortController();
  const combined = signal ? AbortSignal.any([signal, stop.signal]) : stop.signal;
  let total = 0;
  let next = 0;
  /** One of the fetches at once: takes the next URL until none is left. */
  const fetchInTurn = async () => {
    while (next < fetches.length && !combined.aborted) {
      const i = fetches[next++]!;
      const bytes = await fetchImage(refs[i]!, options, combined);
      total += bytes.length;
      if (total > options.maxTotalBytes)
        throw new ApiError(
          'payload_too_large',
          `The images of this request come to more than ${options.maxTotalBytes} bytes (${settings.bodyLimit.env}): send fewer at a time.`,
          { param: refs[i]!.param },
        );
      check(bytes, refs[i]!, i);
    }
  };
  // The first failure is the answer; later ones are what stopping the rest caused.
  let failure: { error: unknown } | undefined;
  await Promise.all(
    Array.from({ length: Math.min(fetchesAtOnce, fetches.length) }, () =>
      fetchInTurn().catch((error: unknown) => {
        failure ??= { error };
        stop.abort();
      }),
    ),
  );
  if (failure) throw failure.error;
  // A request cancelled between two fetches stops without a failure of its own.
  if (signal?.aborted) throw new ApiError('client_closed');
  return loaded;
}
