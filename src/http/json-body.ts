/**
 * JSON request bodies, parsed as fastify parses them, except an empty one on a route whose body is
 * optional: curl users send `content-type: application/json` by habit, also with no body (`curl -X
 * POST .../unload -H 'content-type: application/json'`), and there it means no options. A route's
 * body is optional when it has no body schema or its schema admits no body (fastify validates a
 * missing body as null); a route that needs a body still answers "The request body is empty".
 *
 * A large body's long ASCII string values (an image's data URI: a photo is 1.4 MB of base64) are
 * lifted out of the raw bytes before JSON.parse and put back after it, as one-byte strings made
 * straight from the bytes: JSON.parse scanning such a string cost 8-11 ms of the main thread per
 * photo on a 2-core VM, most of its time on a request with an image. Only strings whose bytes are
 * printable ASCII without escapes are lifted, which JSON.parse reads as those very characters, so
 * the value is the same; a body that does not parse is parsed again whole, for the same error.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyBodyParser, FastifyInstance, FastifyRequest } from 'fastify';

declare module 'fastify' {
  interface FastifyRequest {
    /** How long parsing the JSON body took (null: no JSON body); routes report it with their timings. */
    parseMs: number | null;
  }
}

function bodyIsOptional(request: FastifyRequest): boolean {
  const validate = request.getValidationFunction('body') as ((body: unknown) => boolean) | undefined;
  return typeof validate !== 'function' || validate(null);
}

/** Bodies from this size on have their long string values lifted out before JSON.parse. */
const liftBodiesFrom = 64 * 1024;
/** String values from this length on are lifted. */
const liftStringsFrom = 4096;

export function parseJsonBodies(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.decorateRequest('parseMs', null);
  const parse: FastifyBodyParser<Buffer> = (request, body, done) => {
    if (body.length === 0 && bodyIsOptional(request)) {
      done(null, undefined);
      return;
    }
    const started = performance.now();
    const finish = (error: Error | null, value?: unknown) => {
      request.parseMs = performance.now() - started;
      done(error, value);
    };
    const lifted = body.length >= liftBodiesFrom ? liftLongStrings(body) : undefined;
    if (!lifted) {
      void parseJson(request, body.toString('utf8'), finish);
      return;
    }
    void parseJson(request, lifted.text, (error, value) => {
      // The whole body again, so that the error says what it says of the body as sent.
      if (error) void parseJson(request, body.toString('utf8'), finish);
      else finish(null, putBack(value, lifted));
    });
  };
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, parse);
}

interface Lifted {
  /** The body as text, each lifted string replaced by a marker string. */
  text: string;
  /** Begins every marker: a NUL and a random UUID, which no sent string can know. */
  marker: string;
  strings: string[];
}

const isJsonSpace = (byte: number | undefined) => byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
const isPrintable = (byte: number) => byte >= 0x20 && byte <= 0x7e;

/**
 * Whether bytes[from, to) are all printable ASCII (0x20-0x7e), four at a time: a word has a byte
 * under 0x20 when subtracting 0x20 from each borrows into a clear top bit, one over 0x7e when adding
 * 1 to each sets it (or it was set). Twice the speed of a pattern over the string, and no string is
 * made of bytes that will not be lifted.
 */
function isPrintableAscii(bytes: Buffer, from: number, to: number): boolean {
  let at = from;
  while (at < to && (bytes.byteOffset + at) % 4 !== 0) if (!isPrintable(bytes[at++]!)) return false;
  const words = new Uint32Array(bytes.buffer, bytes.byteOffset + at, (to - at) >> 2);
  for (let i = 0; i < words.length; i++) {
    const word = words[i]!;
    if ((((word - 0x20202020) & ~word) | (word + 0x01010101) | word) & 0x80808080) return false;
  }
  for (at += words.length * 4; at < to; at++) if (!isPrintable(bytes[at]!)) return false;
  return true;
}

/**
 * The body with its long string values (never keys) replaced by markers, when it has any. String
 * bounds are found as a JSON tokenizer finds them whatever else the body holds: from a quote to the
 * next quote that no backslash escapes.
 */
export function liftLongStrings(body: Buffer): Lifted | undefined {
  const marker = `\u0000${randomUUID()}:`;
  const parts: string[] = [];
  const strings: string[] = [];
  let copied = 0;
  let from = 0;
  let backslash = body.indexOf(0x5c);
  for (;;) {
    const open = body.indexOf(0x22, from);
    if (open < 0) break;
    let close = -1;
    let escaped = false;
    for (let at = open + 1; ;) {
      const quote = body.indexOf(0x22, at);
      if (quote < 0) break;
      if (backslash !== -1 && backslash < at) backslash = body.indexOf(0x5c, at);
      if (backslash === -1 || backslash > quote) {
        close = quote;
        break;
      }
      escaped = true;
      at = backslash + 2;
    }
    // An unterminated string: JSON.parse says so.
    if (close < 0) return undefined;
    from = close + 1;
    if (escaped || close - open - 1 < liftStringsFrom) continue;
    let next = from;
    while (isJsonSpace(body[next])) next++;
    if (body[next] === 0x3a) continue;
    if (!isPrintableAscii(body, open + 1, close)) continue;
    parts.push(body.toString('utf8', copied, open), JSON.stringify(marker + strings.length));
    strings.push(body.toString('latin1', open + 1, close));
    copied = from;
  }
  if (strings.length === 0) return undefined;
  parts.push(body.toString('utf8', copied));
  return { text: parts.join(''), marker, strings };
}

/** The parsed value with each marker replaced by its lifted string. */
function putBack(value: unknown, lifted: Lifted): unknown {
  if (typeof value === 'string')
    return value.startsWith(lifted.marker) ? lifted.strings[Number(value.slice(lifted.marker.length))] : value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = putBack(value[i], lifted);
  } else if (typeof value === 'object' && value !== null) {
    const record = value as Record<string, unknown>;
    for (const key of Object.keys(record)) record[key] = putBack(record[key], lifted);
  }
  return value;
}
