/**
 * Fetches one web page for the reader, or an image an embedding request names by URL, with the
 * SSRF guard and limits:
 * - only http and https;
 * - every connection's address is checked after DNS resolution, in the socket's own lookup, so
 *   the address checked is the address connected to (no second resolution to rebind);
 * - redirects are followed by hand, each hop checked the same way, up to a limit;
 * - the body is cut off above a size (after decompression) and the whole fetch above a time.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import type { Readable } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import { ApiError, invalid } from '../../errors.js';
import { clientSpan, tracer } from '../../tracing/spans.js';
import { version } from '../../version.js';
import { isPublicAddress } from './address-policy.js';

/** Redirects the reader follows, for pages and images alike. */
export const readerRedirects = 5;

export interface FetchLimits {
  /** Largest body accepted, after decompression, in bytes. */
  maxBytes: number;
  /** Longest the whole fetch (redirects included) may take, in ms. */
  timeoutMs: number;
  maxRedirects: number;
  /** Let the reader reach private, loopback and link-local addresses. */
  allowPrivate: boolean;
  /** Which resolved addresses may be connected to; default: public ones, or any with allowPrivate. */
  allowAddress?: (address: string) => boolean;
}

function addressCheck(limits: FetchLimits): (address: string) => boolean {
  return limits.allowAddress ?? (limits.allowPrivate ? () => true : isPublicAddress);
}

/** What is fetched: how the request asks for it, and how errors name it. */
export interface FetchTarget {
  /** What the answer is called in errors: "page", "image of input[2]". */
  what: string;
  /** How an error names the URL asked for: "this url", "the URL of input[2]". */
  subject: string;
  /** The request field that named the URL. */
  param: string;
  accept: string;
  /** The refusal of a body over maxBytes (`size`: its declared length, when it declared one). */
  tooLarge?: (maxBytes: number, size?: number) => ApiError;
}

const page: FetchTarget = {
  what: 'page',
  subject: 'this url',
  param: 'url',
  accept: 'text/html,application/xhtml+xml,text/plain;q=0.9,text/markdown;q=0.9,*/*;q=0.1',
};

/** A body over the limit is the other server's failure by default: a page too large to read. */
function tooLarge(target: FetchTarget, maxBytes: number, size?: number): ApiError {
  if (target.tooLarge) return target.tooLarge(maxBytes, size);
  const message =
    size === undefined
      ? `The ${target.what} is larger than ${maxBytes} bytes, the most the reader takes.`
      : `The ${target.what} is ${size} bytes; the reader takes at most ${maxBytes}.`;
  return new ApiError('upstream_error', message, { permanent: true });
}

export interface FetchedBody {
  /** The URL after redirects. */
  url: string;
  status: number;
  /** The Content-Type header as the server sent it (absent: empty). */
  contentType: string;
  body: Buffer;
}

export interface FetchedPage {
  /** The URL after redirects. */
  url: string;
  status: number;
  /** The media type, lower-case, without parameters. */
  mediaType: string;
  body: string;
}

const userAgent = `onnx-gateway-reader/${version}`;

/**
 * One answer for a host the reader does not fetch, whether it resolves to a private address or
 * does not resolve: anything more would map the server's network for the requester. The detail
 * (name, address) is the error's cause, which the server logs.
 */
function refused(url: URL, hop: boolean, detail: string, target: FetchTarget): ApiError {
  const what = hop
    ? `The ${target.what} redirected to a URL the reader does not fetch`
    : `The reader does not fetch ${target.subject}`;
  return new ApiError('invalid_request', `${what}: its host does not resolve to an address the reader may fetch.`, {
    param: target.param,
    cause: new Error(`${url.host}: ${detail}`),
  });
}

/** A socket lookup that refuses addresses the check does not allow. */
function guardedLookup(
  url: URL,
  allowed: (address: string) => boolean,
  hop: boolean,
  target: FetchTarget,
): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
      if (error) return callback(error, '', 0);
      const bad = addresses.find((a) => !allowed(a.address));
      if (bad) return callback(refused(url, hop, `resolves to ${bad.address}`, target), '', 0);
      if ((options as { all?: boolean }).all)
        return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

function parseUrl(raw: string, target: FetchTarget, base?: URL): URL {
  const { param } = target;
  let url: URL;
  try {
    url = new URL(raw, base);
  } catch {
    throw invalid(
      param,
      base ? `The ${target.what} redirected to an invalid URL "${raw}".` : `${param} "${raw}" is not a valid URL.`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw invalid(param, `${param} must be http or https; got ${url.protocol.slice(0, -1)}.`);
  if (url.username || url.password) throw invalid(param, `${param} must not contain credentials.`);
  return url;
}

function decoded(response: IncomingMessage): Readable {
  switch ((response.headers['content-encoding'] ?? '').toLowerCase()) {
    case 'gzip':
    case 'x-gzip':
      return response.pipe(createGunzip());
    case 'deflate':
      return response.pipe(createInflate());
    case 'br':
      return response.pipe(createBrotliDecompress());
    default:
      return response;
  }
}

/** The charset from Content-Type, else from a <meta> in the first bytes, else UTF-8. */
function decodeText(bytes: Buffer, contentType: string): string {
  const fromHeader = /charset=["']?([\w-]+)/i.exec(contentType)?.[1];
  const fromMeta = fromHeader
    ? undefined
    : /<meta[^>]+charset=["']?([\w-]+)/i.exec(bytes.subarray(0, 2048).toString('latin1'))?.[1];
  try {
    return new TextDecoder(fromHeader ?? fromMeta ?? 'utf-8').decode(bytes);
  } catch {
    return new TextDecoder('utf-8').decode(bytes);
  }
}

function once(
  url: URL,
  limits: FetchLimits,
  target: FetchTarget,
  hop: boolean,
  signal: AbortSignal,
  /** With tracing on, the headers that carry the trace to the server. */
  traceHeaders?: Record<string, string>,
): Promise<{ response: IncomingMessage; body?: Buffer }> {
  const literal = url.hostname.replace(/^\[|\]$/g, '');
  // The socket skips the lookup for IP literals, so they are checked here.
  if (isIP(literal) && !addressCheck(limits)(literal))
    return Promise.reject(refused(url, hop, 'a private, loopback or link-local address', target));
  return new Promise((resolve, reject) => {
    const request = (url.protocol === 'https:' ? httpsRequest : httpRequest)(url, {
      method: 'GET',
      signal,
      lookup: guardedLookup(url, addressCheck(limits), hop, target),
      headers: {
        'user-agent': userAgent,
        accept: target.accept,
        'accept-encoding': 'gzip, deflate, br',
        ...traceHeaders,
      },
    });
    request.on('error', reject);
    request.on('response', (response) => {
      if (response.statusCode && response.statusCode >= 300 && response.statusCode < 400 && response.headers.location) {
        response.resume();
        resolve({ response });
        return;
      }
      const declared = Number(response.headers['content-length']);
      if (Number.isFinite(declared) && declared > limits.maxBytes && !response.headers['content-encoding']) {
        request.destroy();
        reject(tooLarge(target, limits.maxBytes, declared));
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      const stream = decoded(response);
      stream.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > limits.maxBytes) {
          request.destroy();
          stream.destroy();
          reject(tooLarge(target, limits.maxBytes));
          return;
        }
        chunks.push(chunk);
      });
      stream.on('error', (error) =>
        reject(new ApiError('upstream_error', `The ${target.what} could not be read: ${error.message}.`)),
      );
      stream.on('end', () => resolve({ response, body: Buffer.concat(chunks) }));
    });
    request.end();
  });
}

/** One resource, redirects followed, within the limits; a status other than 2xx is an upstream_error. */
export async function fetchBody(
  raw: string,
  limits: FetchLimits,
  target: FetchTarget,
  signal?: AbortSignal,
): Promise<FetchedBody> {
  let url = parseUrl(raw, target);
  const timeout = AbortSignal.timeout(limits.timeoutMs);
  const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
  for (let hops = 0; ; hops++) {
    let result;
    try {
      const hop = url;
      result = await (tracer
        ? clientSpan(
            tracer,
            'GET',
            hop,
            (headers) => once(hop, limits, target, hops > 0, combined, headers),
            ({ response }) => response.statusCode ?? 0,
          )
        : once(url, limits, target, hops > 0, combined));
    } catch (error) {
      if (error instanceof ApiError) throw error;
      if (timeout.aborted)
        throw new ApiError('timeout', `The ${target.what} did not load within ${limits.timeoutMs} ms.`);
      if (signal?.aborted) throw new ApiError('client_closed');
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOTFOUND' || code === 'EAI_AGAIN')
        throw refused(url, hops > 0, `does not resolve (${code})`, target);
      throw new ApiError(
        'upstream_error',
        `The ${target.what} at ${url.host} could not be fetched: ${code ?? (error as Error).message}.`,
      );
    }
    const { response, body } = result;
    const status = response.statusCode ?? 0;
    if (!body) {
      if (hops >= limits.maxRedirects)
        throw new ApiError('upstream_error', `The ${target.what} redirected more than ${limits.maxRedirects} times.`, {
          permanent: true,
        });
      url = parseUrl(response.headers.location!, target, url);
      continue;
    }
    // A resource that is not there (4xx) will not be there on a retry; a failing server (5xx) may recover.
    if (status < 200 || status >= 300)
      throw new ApiError('upstream_error', `The ${target.what} answered HTTP ${status}.`, {
        permanent: status >= 400 && status < 500,
      });
    return { url: url.href, status, contentType: response.headers['content-type'] ?? '', body };
  }
}

export async function fetchPage(raw: string, limits: FetchLimits, signal?: AbortSignal): Promise<FetchedPage> {
  const fetched = await fetchBody(raw, limits, page, signal);
  const contentType = fetched.contentType || 'text/html';
  return {
    url: fetched.url,
    status: fetched.status,
    mediaType: contentType.split(';')[0]!.trim().toLowerCase(),
    body: decodeText(fetched.body, contentType),
  };
}
