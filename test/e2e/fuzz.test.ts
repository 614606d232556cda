/**
 * A property-based fuzzer over every documented route: fast-check draws bodies from each route's own
 * schema in the server's OpenAPI document, then breaks them (wrong types, huge numbers, deep nesting,
 * unicode edge cases, empty and huge arrays, invalid base64, missing fields, truncated JSON, other
 * content types), and sends them over HTTP to a real server on the stand-in models, many at once.
 * Every request must be answered, none with a 5xx, every 4xx with a code of the error catalogue
 * (and, outside TEI's routes, the catalogue's status), and the server's heap must come back near
 * where it started. FUZZ_SEED replays a run; FUZZ_RUNS sets the requests per route.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { catalogue } from '../../src/errors.js';
import type { Server } from '../../src/main.js';
import { writeTinyImageModels } from '../fixtures/tiny-image-model.js';
import { missing } from '../helpers/resources.js';
import { auth, startServer } from '../helpers/server.js';

const dir = inject('standinsDir');
const models = ['BAAI/bge-small-en-v1.5', 'BAAI/bge-reranker-base', 'Xenova/toxic-bert', 'prithivida/Splade_PP_en_v1'];
const seed = Number(process.env.FUZZ_SEED ?? 20_240_601);
const runsPerRoute = Number(process.env.FUZZ_RUNS ?? 150);
const concurrency = 16;
/** TEI's routes answer in TEI's statuses (422, 424, 413 for a batch); the others in the catalogue's. */
const teiPaths = new Set([
  '/embed',
  '/embed_sparse',
  '/embed_all',
  '/rerank',
  '/predict',
  '/similarity',
  '/tokenize',
  '/decode',
  '/info',
]);

/** The parts of the OpenAPI document's JSON Schemas that the generators read. */
interface Schema {
  $ref?: string;
  const?: unknown;
  enum?: unknown[];
  anyOf?: Schema[];
  oneOf?: Schema[];
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  prefixItems?: Schema[];
  items?: Schema;
  minItems?: number;
  maxItems?: number;
  minimum?: number;
  maximum?: number;
}
interface OpenApiDocument {
  paths: Record<
    string,
    Record<
      string,
      {
        parameters?: { in: string; name: string; schema?: Schema }[];
        requestBody?: { content?: Record<string, { schema?: Schema }> };
      }
    >
  >;
}
interface Route {
  method: string;
  path: string;
  pathParams: string[];
  query?: Schema;
  body?: Schema;
}
interface Case {
  method: string;
  url: string;
  contentType?: string;
  body?: string | Buffer;
  /** What was done to the body, for the report. */
  how: string;
}

// Addresses the web reader may be given: none leaves the machine (loopback and private ones are refused before any fetch).
const readerUrls = [
  'http://127.0.0.1:1/page',
  'http://localhost:0/',
  'http://[::1]/x',
  'file:///etc/passwd',
  'ftp://127.0.0.1/',
  'not a url',
  '',
  'http://10.0.0.1/',
];
const unicodeEdges = [
  '\u0000',
  '\ud800',
  '\udfff',
  'a\ud83d',
  '\ufeff',
  '\u202e right-to-left',
  'e\u0301\u0301\u0301',
  '👍🏽👨‍👩‍👧',
  '\u200b'.repeat(64),
  'ﷺ'.repeat(200),
  '\uffff',
  '𝔘𝔫𝔦𝔠𝔬𝔡𝔢',
  '\r\n\t\u000b',
];
const hugeNumbers = [1e308, -1e308, 2 ** 64, -(2 ** 63), 2 ** 53, 1e-320, -0, 4_294_967_296, 2_147_483_648];
const badBase64 = [
  '%%%',
  'data:image/png;base64,!!!',
  'data:text/plain,hello',
  'AAAA====',
  '====',
  'aGVsbG8',
  'data:;base64,',
  '\u0000',
];

let pngBase64 = '';

function resolve(doc: OpenApiDocument, schema: Schema | undefined): Schema {
  let current = schema ?? {};
  while (current.$ref)
    current = current.$ref
      .split('/')
      .slice(1)
      .reduce<unknown>((node, key) => (node as Record<string, unknown>)[key], doc) as Schema;
  return current;
}

/** Values the schema accepts, or nearly: what a client means to send. */
function valid(doc: OpenApiDocument, raw: Schema | undefined, name = '', depth = 0): fc.Arbitrary<unknown> {
  const schema = resolve(doc, raw);
  if (name === 'url') return fc.constantFrom(...readerUrls);
  if (name === 'model') return fc.constantFrom(...models, 'auto', 'tiny-upscaler', 'no-such-model', '');
  if (name === 'image' || name === 'image[]')
    return fc.oneof(fc.constant(pngBase64), fc.constant([pngBase64, pngBase64]), fc.constantFrom(...badBase64));
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (schema.enum) return fc.constantFrom(...schema.enum);
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives) return fc.oneof(...alternatives.map((s) => valid(doc, s, name, depth)));
  if (Array.isArray(schema.type))
    return fc.oneof(...schema.type.map((type) => valid(doc, { ...schema, type }, name, depth)));
  if (depth > 4) return fc.constant(null);
  switch (schema.type) {
    case 'object': {
      const properties = schema.properties ?? {};
      const required = schema.required ?? [];
      const shape = Object.fromEntries(
        Object.entries(properties).map(([key, value]) => [key, valid(doc, value, key, depth + 1)]),
      );
      if (Object.keys(shape).length === 0)
        return fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 });
      return fc.record(shape, { requiredKeys: required });
    }
    case 'array': {
      if (schema.prefixItems) return fc.tuple(...schema.prefixItems.map((s) => valid(doc, s, name, depth + 1)));
      const max = Math.min(schema.maxItems ?? 6, 6);
      return fc.array(valid(doc, schema.items, name, depth + 1), {
        minLength: Math.min(schema.minItems ?? 0, max),
        maxLength: max,
      });
    }
    case 'string':
      return fc.oneof(
        fc.constantFrom('hello world', 'The quick brown fox jumps over the lazy dog.', 'a', 'query', 'passage: otters'),
        fc.string({ maxLength: 40 }),
      );
    case 'integer': {
      // Small values, from the schema's minimum where that is above them (e.g. expiry seconds).
      const min = Math.max(schema.minimum ?? -4, -4);
      return fc.integer({ min, max: Math.min(schema.maximum ?? min + 68, min + 68) });
    }
    case 'number':
      return fc.double({ min: -10, max: 10, noNaN: true });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

/** Paths to every node of a JSON value, the root included. */
function nodes(value: unknown, path: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  out.push(path);
  if (Array.isArray(value)) value.slice(0, 8).forEach((item, i) => nodes(item, [...path, i], out));
  else if (value && typeof value === 'object')
    for (const [key, item] of Object.entries(value)) nodes(item, [...path, key], out);
  return out;
}

function replaced(value: unknown, path: (string | number)[], by: unknown, drop: boolean): unknown {
  if (path.length === 0) return by;
  const copy = (Array.isArray(value) ? [...(value as unknown[])] : { ...(value as object) }) as Record<
    string | number,
    unknown
  >;
  const [head, ...rest] = path;
  if (rest.length === 0 && drop && !Array.isArray(copy)) delete copy[head!];
  else copy[head!] = replaced(copy[head!], rest, by, drop);
  return copy;
}

/** Deep nesting is written as text (JSON.stringify would run out of stack first): a marker string stands in for it. */
const deepMarker = (levels: number) => `__nested_${levels}_deep__`;
const nestedText = (levels: number) => '[{"a":'.repeat(levels / 2) + '"bottom"' + '}]'.repeat(levels / 2);
const stringify = (value: unknown) =>
  JSON.stringify(value).replace(/"__nested_(\d+)_deep__"/g, (_, levels: string) => nestedText(Number(levels)));

/** What takes a node's place: another type, a number out of range, an edge of unicode, nothing, too much. */
const replacement = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }).map((v) => ({ value: v, how: 'wrong type' })),
  fc.constantFrom(...hugeNumbers).map((v) => ({ value: v, how: 'huge number' })),
  fc.constantFrom(...unicodeEdges).map((v) => ({ value: v, how: 'unicode edge' })),
  fc.constantFrom(...badBase64).map((v) => ({ value: v, how: 'invalid base64' })),
  fc.constantFrom([], {}, '', null).map((v) => ({ value: v, how: 'empty' })),
  fc
    .constantFrom(3000, 20_000)
    .map((n) => ({ value: Array.from({ length: n }, (_, i) => (n > 5000 ? i : `item ${i}`)), how: `array of ${n}` })),
  fc.constantFrom(200, 5000).map((n) => ({ value: deepMarker(n), how: `nesting ${n} deep` })),
  fc.constant({ value: 'word '.repeat(60_000), how: 'long string' }),
);

function encodeUnpaired(text: string): Buffer {
  // Bytes that are not UTF-8 at all, inside an otherwise well-formed document.
  const at = Math.max(1, Math.floor(text.length / 2));
  return Buffer.concat([Buffer.from(text.slice(0, at)), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from(text.slice(at))]);
}

function caseOf(doc: OpenApiDocument, route: Route): fc.Arbitrary<Case> {
  const params = fc.tuple(
    ...route.pathParams.map((name) =>
      name === 'model' || name === 'owner'
        ? fc.constantFrom(...models.map((m) => m.split('/')[name === 'owner' ? 0 : 1]!), 'BAAI', 'none', '..', '%2e%2e')
        : fc.oneof(fc.uuid(), fc.string({ maxLength: 30 }), fc.constantFrom(...unicodeEdges)),
    ),
  );
  const query = route.query
    ? fc.option(fc.oneof(fc.constantFrom('0', '0.5', '61', '-1', '1e9', 'abc', ''), fc.string({ maxLength: 6 })), {
        nil: undefined,
      })
    : fc.constant(undefined);
  const body = route.body ? valid(doc, route.body) : fc.constant(undefined);
  const breakage = fc.oneof(
    { weight: 2, arbitrary: fc.constant({ kind: 'valid' as const }) },
    { weight: 6, arbitrary: fc.record({ kind: fc.constant('replace' as const), at: fc.nat(), with: replacement }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('drop' as const), at: fc.nat() }) },
    {
      weight: 2,
      arbitrary: fc.record({ kind: fc.constant('truncate' as const), at: fc.double({ min: 0, max: 1, noNaN: true }) }),
    },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom('not-utf8', 'text/plain', 'no body', 'deep text', 'json scalar')
        .map((kind) => ({ kind })),
    },
  );
  return fc.tuple(params, query, body, breakage).map(([values, wait, value, broken]): Case => {
    // A URL carries UTF-8: a lone surrogate goes as U+FFFD.
    const encode = (text: string) => encodeURIComponent(Buffer.from(text).toString());
    let url = route.pathParams.reduce(
      (path, name, i) => path.replace(`{${name}}`, encode(values[i] as string)),
      route.path,
    );
    if (wait !== undefined) url += `?wait=${encode(wait)}`;
    if (!route.body) return { method: route.method, url, how: 'no body' };
    const json = 'application/json';
    switch (broken.kind) {
      case 'valid':
        return { method: route.method, url, contentType: json, body: stringify(value), how: 'from the schema' };
      case 'replace': {
        const all = nodes(value);
        const path = all[broken.at % all.length]!;
        return {
          method: route.method,
          url,
          contentType: json,
          body: stringify(replaced(value, path, broken.with.value, false)),
          how: `${broken.with.how} at ${path.join('.') || 'the root'}`,
        };
      }
      case 'drop': {
        const all = nodes(value).filter((path) => path.length > 0);
        if (all.length === 0) return { method: route.method, url, contentType: json, body: '{}', how: 'empty object' };
        const path = all[broken.at % all.length]!;
        return {
          method: route.method,
          url,
          contentType: json,
          body: stringify(replaced(value, path, undefined, true)),
          how: `without ${path.join('.')}`,
        };
      }
      case 'truncate': {
        const text = stringify(value);
        return {
          method: route.method,
          url,
          contentType: json,
          body: text.slice(0, Math.floor(text.length * broken.at)),
          how: 'truncated JSON',
        };
      }
      case 'not-utf8':
        return {
          method: route.method,
          url,
          contentType: json,
          body: encodeUnpaired(stringify(value)),
          how: 'bytes that are not UTF-8',
        };
      case 'text/plain':
        return { method: route.method, url, contentType: 'text/plain', body: stringify(value), how: 'text/plain' };
      case 'no body':
        return { method: route.method, url, contentType: json, body: '', how: 'an empty body' };
      case 'deep text':
        return {
          method: route.method,
          url,
          contentType: json,
          body: '['.repeat(100_000) + ']'.repeat(100_000),
          how: 'JSON nested 100,000 deep',
        };
      default:
        return { method: route.method, url, contentType: json, body: '12345678901234567890123', how: 'a JSON scalar' };
    }
  });
}

function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

describe.skipIf(missing(dir !== '', `the stand-ins could not be generated: ${inject('standinsMissing')}`))(
  'fuzzing every route',
  () => {
    let server: Server;
    let base: string;
    let imageDir: string;

    beforeAll(async () => {
      imageDir = await mkdtemp(join(tmpdir(), 'onnx-gateway-fuzz-images-'));
      await writeTinyImageModels(imageDir);
      pngBase64 = (
        await sharp({ create: { width: 8, height: 8, channels: 3, background: '#336699' } })
          .png()
          .toBuffer()
      ).toString('base64');
      server = await startServer({
        modelsDir: dir,
        models,
        workers: 1,
        imageModels: ['tiny-upscaler'],
        imageModelsDir: imageDir,
        imageWorkers: 1,
        imageIntraOpThreads: 1,
        imageMaxPixels: 256 * 256,
        indexWriteKeys: [auth.authorization.slice('Bearer '.length)],
      });
      base = await server.app.listen({ port: 0, host: '127.0.0.1' });
    }, 120_000);

    afterAll(async () => {
      await server?.close();
      if (imageDir) await rm(imageDir, { recursive: true, force: true });
    });

    it(`answers ${runsPerRoute} broken and whole requests per route: no 5xx, none unanswered, catalogue errors, the heap back near its start`, async () => {
      const doc = (await server.app.inject({ method: 'GET', url: '/openapi.json' })).json<OpenApiDocument>();
      const routes: Route[] = [];
      for (const [path, item] of Object.entries(doc.paths)) {
        for (const [method, operation] of Object.entries(item)) {
          const parameters = operation.parameters ?? [];
          routes.push({
            method: method.toUpperCase(),
            path,
            pathParams: parameters.filter((p) => p.in === 'path').map((p) => p.name),
            query: parameters.find((p) => p.in === 'query')?.schema,
            body: operation.requestBody?.content?.['application/json']?.schema,
          });
        }
      }
      routes.push({ method: 'GET', path: '/health', pathParams: [] });
      expect(routes.length).toBeGreaterThan(30);

      const cases = routes.flatMap((route, i) =>
        fc.sample(caseOf(doc, route), { numRuns: runsPerRoute, seed: seed + i }),
      );
      const send = async (c: Case) => {
        const response = await fetch(`${base}${c.url}`, {
          method: c.method,
          headers: { ...auth, ...(c.contentType ? { 'content-type': c.contentType } : {}) },
          body: c.body,
          signal: AbortSignal.timeout(60_000),
        });
        return { status: response.status, text: await response.text() };
      };

      const failures: string[] = [];
      const statuses = new Map<number, number>();
      const describe = (c: Case, why: string) => `${c.method} ${c.url.slice(0, 120)} (${c.how}): ${why.slice(0, 300)}`;
      const check = (c: Case, status: number, text: string) => {
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        if (status >= 500) return failures.push(describe(c, `${status} ${text.slice(0, 300)}`));
        if (status < 400) return;
        let body: { error?: { code?: string }; code?: string };
        try {
          body = JSON.parse(text) as typeof body;
        } catch {
          return failures.push(describe(c, `${status} with a body that is not JSON: ${text.slice(0, 200)}`));
        }
        const code = (body.error?.code ?? body.code) as keyof typeof catalogue | undefined;
        if (!code || !(code in catalogue))
          return failures.push(describe(c, `${status} without a catalogue code: ${text.slice(0, 200)}`));
        if (!teiPaths.has(c.url.split('?')[0]!) && catalogue[code].status !== status)
          failures.push(describe(c, `${status} with code ${code}, whose status is ${catalogue[code].status}`));
      };
      const run = async (batch: Case[]) => {
        let next = 0;
        await Promise.all(
          Array.from({ length: concurrency }, async () => {
            while (next < batch.length) {
              const c = batch[next++]!;
              try {
                const { status, text } = await send(c);
                check(c, status, text);
              } catch (error) {
                failures.push(describe(c, `unanswered: ${(error as Error).message}`));
              }
            }
          }),
        );
      };

      // A first round warms every path (models, workers, the index), then the heap is measured from there.
      await run(cases.slice(0, routes.length * 10));
      collectGarbage();
      const heapBefore = process.memoryUsage().heapUsed;
      const started = performance.now();
      await run(cases);
      const seconds = (performance.now() - started) / 1000;
      collectGarbage();
      const heapAfter = process.memoryUsage().heapUsed;

      const summary = [...statuses.entries()]
        .sort(([a], [b]) => a - b)
        .map(([status, n]) => `${status}: ${n}`)
        .join(', ');
      console.log(
        `fuzz: ${cases.length} requests over ${routes.length} routes in ${seconds.toFixed(1)} s (seed ${seed}); statuses ${summary}; heap ${(heapBefore / 2 ** 20).toFixed(0)} -> ${(heapAfter / 2 ** 20).toFixed(0)} MB`,
      );
      expect(failures.slice(0, 20), `${failures.length} failures`).toEqual([]);
      expect(cases.length).toBeGreaterThanOrEqual(5000);
      expect(heapAfter - heapBefore).toBeLessThan(64 * 2 ** 20);
    }, 600_000);
  },
);
